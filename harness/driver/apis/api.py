"""One API the HTTP target speaks, as its registry entry: its URL, its request form, its own
settings and how a server counts its prompts. Every other place reads these, never the name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from harness.driver.apis.model_list import openai_models

if TYPE_CHECKING:
    from harness.driver.apis.hosted_cache import HostedCache
    from harness.driver.apis.stream import StreamDecoder
    from harness.driver.apis.urls import Root
    from harness.driver.http import HTTPTargetConfig
    from harness.driver.target import RequestSpec


class RequestForm(Protocol):
    """One API's side of the HTTP target: what its requests carry, and how its streams read."""

    def headers(self) -> dict[str, str]:
        """Headers every request carries (the key, an API version)."""
        ...

    def body(self, req: RequestSpec) -> dict: ...

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        """The JSON body in pieces to send in order (`b"".join` gives the JSON)."""
        ...

    def decoder(self, keep_text: bool) -> StreamDecoder: ...

    def finished(self, req: RequestSpec, dec: StreamDecoder) -> None:
        """`req` completed, read by `dec` (state a next request builds on)."""
        ...


@dataclass(frozen=True)
class API:
    """An API's registry entry (apis/__init__.py lists them)."""

    name: str  # the scenario's `target.api`
    path: str  # under `version`; "{model}" stands for the model's name (Gemini's URLs hold it)
    form: Callable[[HTTPTargetConfig], RequestForm]
    # Prompts are chat messages the server renders with its chat template (else token ids or
    # text, tokenized as they are).
    chat_template: bool
    # The server adds the tokenizer's special tokens to the rendered prompt (vLLM's Responses).
    special_tokens: bool = False
    # Usage on every event when asked (vLLM's stream_options.continuous_usage_stats).
    usage_per_event: bool = False
    # The running usage on every event, unasked, whatever the server (Gemini's usageMetadata):
    # each event's output tokens are exact, none are placed by text.
    running_usage: bool = False
    # The target settings of this API alone: refused with another, in the manifest with it.
    options: tuple[str, ...] = ()
    # The option under which the server keeps a session's history: the prompts sent are then
    # only the new items, and the preflight checks that a second request can build on a first.
    server_history: str | None = None
    # Settings the API has no field for (not sent, the manifest says so): `target.sampling`'s,
    # and the forced length's (`min_tokens`, `ignore_eos`: vLLM's and SGLang's extensions).
    not_carried: tuple[str, ...] = ()
    # The version segment its path and its model list sit under.
    version: str = "/v1"
    # Added to the query of every request URL (Gemini's `alt=sse`: a stream of server-sent events).
    query: str = ""
    # Added to the query of its models URL (Gemini's `pageSize`: all of them on one page).
    models_query: str = ""
    # Its server's model list (the parsed JSON of `models_url`) as cards by model name, each
    # with the name under `id` (model_list.py).
    model_list: Callable[[object], dict[str, dict]] = openai_models
    # The hosted prompt caches this API can be under (`target.cache_rules` names one by kind;
    # `auto` picks one by the endpoints' hosts): hosted_cache.py.
    hosted: tuple[HostedCache, ...] = ()

    def url(self, root: Root, model: str) -> str:
        """Where this API's requests for `model` go on the server at `root` (urls.py); an
        endpoint that is already this API's URL is used as it is."""
        if root.given == self.name:
            return root.at(root.given_path, self.query)
        path = self.path.replace("{model}", quote(model, safe=""))
        return root.at(root.path + self.version + path, self.query)

    def models_url(self, root: Root) -> str:
        """Where the server at `root` lists its models for this API."""
        return root.at(root.path + self.version + "/models", self.models_query)

    def resource_url(self, root: Root, resource: str) -> str:
        """`resource` (e.g. "/models") under this API's version segment on the server at `root`."""
        return root.at(root.path + self.version + resource)

    def keeps_history(self, settings: object) -> bool:
        """Whether the server keeps the history under `settings` (a config with the options)."""
        return self.server_history is not None and bool(getattr(settings, self.server_history))

    def prompt_space(self, settings: object) -> dict[str, bool | str | None]:
        """How a server counts this API's prompts under `settings` (the manifest's replay
        section: the analyzer's ideal rebuilds prompts in the server's tokens from it);
        `server_history` names the option that had the server keep the history, if on."""
        return {
            "chat_template": self.chat_template,
            "special_tokens": self.special_tokens,
            "server_history": self.server_history if self.keeps_history(settings) else None,
        }
