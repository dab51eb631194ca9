"""The HTTP target's check before the clock starts: each endpoint answers, serves the model (when
it lists any on /models) and answers one probe request shaped like the run's (its API, sampling,
and the tools its first request carries, with a one-word prompt); else a one-line `TargetError`.

`preflight` is the one place that reads /models: what else a run wants from there (e.g. a
context limit) belongs beside the model check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from harness.driver.context_limit import model_len
from harness.driver.http.config import models_url, redact
from harness.driver.http.wire import WireError
from harness.driver.manifest import redact_url
from harness.driver.target import Event, Failure, RequestSpec
from harness.errors import TargetError

if TYPE_CHECKING:
    from harness.driver.http.target import HTTPTarget


async def preflight(target: HTTPTarget, i: int, base: str) -> None:
    """Endpoint `i` (at `base`) answers at all; with `config.preflight`, it serves the model and
    answers one probe request."""
    models = await list_models(target, base)
    c = target.config
    if c.model in models:
        target.served[redact_url(base)] = served_identity(models[c.model])
    target.context_limits[base] = model_len(list(models.values()), c.model)  # context_limit.py
    if not c.preflight:
        return
    if models and c.model not in models:
        raise TargetError(
            f"endpoint {redact_url(base)} does not serve model {c.model!r}; it serves: "
            f"{', '.join(sorted(models))}"
        )
    await _probe(target, i, base)


async def list_models(target: HTTPTarget, base: str) -> dict[str, dict]:
    """The models the server lists, by name, as the API's entry reads its list (empty when it
    lists none or does not parse)."""
    c = target.config
    url = models_url(base, c.api)
    try:
        status, body = await target.client().get(url, target.base_headers)
    except WireError as exc:
        message = redact(f"{exc.error_class}: {exc}", c.secrets())
        raise TargetError(f"cannot reach endpoint {redact_url(base)}: {message}") from None
    try:
        listing = orjson.loads(body) if status == 200 else None
    except orjson.JSONDecodeError:
        return {}
    return target.api.model_list(listing)


_IDENTITY_KEYS = ("engine", "runner", "simulated", "device", "modelled_device", "preset")


def served_identity(card: dict) -> dict:
    """What a /models card says serves the model: `owned_by` (vLLM: "vllm"), `max_model_len`,
    and the reference server's `metadata` (runner, device, simulated). Strings are cut short:
    a card is the server's to write, the manifest ours."""
    meta = card.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    found = {"owned_by": card.get("owned_by"), "max_model_len": card.get("max_model_len")}
    found.update({k: meta.get(k) for k in _IDENTITY_KEYS})
    return {
        k: v[:120] if isinstance(v, str) else v
        for k, v in found.items()
        if isinstance(v, str | int | float)  # bool is an int; None and nested values are dropped
    }


async def _probe(target: HTTPTarget, i: int, base: str) -> None:
    """One request answered; where the server keeps the history (the API's `server_history`
    option, e.g. Responses' previous_response_id), a second that builds on the first (a server
    that stores nothing answers it 404)."""
    messages = [{"role": "user", "content": "ping"}]
    await _probe_once(target, i, base, messages, "")
    if target.api.keeps_history(target.config):
        messages = [*messages, {"role": "assistant", "content": "pong"}, messages[0]]
        hint = " (the server keeps no responses? vLLM: VLLM_ENABLE_RESPONSES_API_STORE=1)"
        await _probe_once(target, i, base, messages, hint)


async def _probe_once(
    target: HTTPTarget, i: int, base: str, messages: list[dict], hint: str
) -> None:
    probe = RequestSpec(
        request_id="preflight",
        session_id="preflight",
        sticky_key="preflight",
        endpoint=i,
        max_tokens=1,
        prompt_tokens=4,
        messages=messages,
        prompt=[1, 2, 3, 4],
        tools=target.probe_tools,  # the run's, with its API and sampling: the same shape
    )
    sink = ProbeSink()
    await target.stream(probe, sink)
    if sink.failure is not None:
        f = sink.failure
        shaped = " shaped like the run's (its tools, API, sampling)" if probe.tools else ""
        raise TargetError(
            f"endpoint {redact_url(base)}: the probe request{shaped} failed ({f.error_class}: "
            f"{f.message}){hint}; --no-preflight skips this check"
        )


class ProbeSink:
    """The preflight's probe: only its failure matters."""

    failure: Failure | None = None

    def chunk(self, t: float, tokens: int, text: str) -> None:
        pass

    def event(self, ev: Event) -> None:
        if isinstance(ev, Failure):
            self.failure = ev
