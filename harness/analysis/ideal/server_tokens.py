"""The ideal cache and the expected prompt lengths in the server's own tokens.

Token-id prompts reach the server as the trace's ids, so the trace's token space is the server's.
Chat messages and text prompts are tokenized by the server: a chat prompt is the conversation
rendered with the model's chat template (role markers, separators) and its text re-tokenized, so
its length and the prefix it shares with earlier prompts differ from the trace's. Given the
server's tokenizer folder (`harness analyze --tokenizer DIR`, else the run's own `tokenizer`
setting when it is a folder with a chat template), every prompt is rebuilt from the trace as the
driver sent it, rendered and tokenized as the server does (`trace.chat_tokens`), and the ideal
cache walks those tokens (`trace.token_prefixes`); each request's `prompt_tokens` is checked
against the local count. Without a template a chat run's ideal stays in trace tokens, scaled
per request to the server's prompt length: it is approximate, compare rates, not token counts.
See docs/metrics.md, "Token space".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from harness.errors import InputError
from harness.schema import ReplaySettings
from harness.trace.chat_tokens import TOKENIZER_FILE, ChatTemplateError, ChatTokenizer
from harness.trace.cycles import cycle_salt, split_cycled_id
from harness.trace.requests import RequestSource
from harness.trace.token_prefixes import ID_BYTES, TokenPrefixes, token_key

# what the walk leaves per record (analysis.ideal.walk), in its token space
WALK_COLUMNS = (
    "ideal_shared_tokens",
    "ideal_ready_tokens",
    "ideal_held_tokens",
    "ideal_kept_tokens",
)


@dataclass
class TokenSpace:
    """Which tokens the ideal counts, and why (summary.json `cache.token_space`)."""

    space: str  # "server" | "trace"
    approximate: bool
    reason: str
    tokenizer: str | None = None
    prompts_checked: int = 0
    mismatches: int = 0
    first_mismatch: dict | None = None
    keys: list[bytes] | None = field(default=None, repr=False)  # per record: its prompt's tokens

    def info(self) -> dict:
        out = {
            "space": self.space,
            "approximate": self.approximate,
            "reason": self.reason,
            "tokenizer": self.tokenizer,
        }
        if self.space == "server":
            out.update(
                prompts_checked=self.prompts_checked,
                prompt_token_mismatches=self.mismatches,
                first_mismatch=self.first_mismatch,
            )
        return out

    def warnings(self) -> list[str]:
        """A prompt the server counted otherwise than the local rendering: the ideal is then not
        in the server's tokens, whatever the space says."""
        if not self.mismatches:
            return []
        first = self.first_mismatch or {}
        return [
            f"token space: {self.mismatches} of {self.prompts_checked} prompts' prompt_tokens "
            f"differ from the local rendering with {self.tokenizer} (first: request "
            f"{first.get('request_id')}, server {first.get('prompt_tokens')}, local "
            f"{first.get('local')}): the server renders or tokenizes otherwise (another chat "
            "template?), so the ideal cache hit is approximate (scaled to each prompt_tokens)"
        ]


class ServerTokenWalk:
    """`analysis.ideal`'s walk over literal token ids: prompts as sent, prompts as ready, and per
    endpoint the prompts it computed, whole and as kept (`analysis.ideal.established`)."""

    def __init__(self, keys: list[bytes], rows: dict[tuple[str, int], int]) -> None:
        self.keys, self.rows = keys, rows
        self.sent, self.done = TokenPrefixes(), TokenPrefixes()
        self.held: dict[int, tuple[TokenPrefixes, TokenPrefixes]] = {}
        self.one_endpoint = False  # set by the walk; the walk over segments uses it, this one not

    def send(self, sid: str, k: int, endpoint: int = 0) -> tuple[int, int, int, int, int]:
        key = self.keys[self.rows[(sid, k)]]
        shared = self.sent.shared_prefix(key)
        self.sent.add(key)
        held, kept = self._held(endpoint)
        return (
            len(key) // ID_BYTES,
            shared,
            self.done.shared_prefix(key),
            held.shared_prefix(key),
            kept.shared_prefix(key),
        )

    def ready(self, sid: str, k: int, endpoint: int = 0, drop: float = 0.0) -> None:
        """The prompt was computed on `endpoint`; a server rule drops `drop` of it (a fraction)."""
        key = self.keys[self.rows[(sid, k)]]
        self.done.add(key)
        held, kept = self._held(endpoint)
        held.add(key)
        tokens = len(key) // ID_BYTES
        kept.add(key[: (tokens - round(drop * tokens)) * ID_BYTES])

    def _held(self, endpoint: int) -> tuple[TokenPrefixes, TokenPrefixes]:
        if endpoint not in self.held:
            self.held[endpoint] = (TokenPrefixes(), TokenPrefixes())
        return self.held[endpoint]


@dataclass(frozen=True)
class PromptSpace:
    """How the run's server counted its API's prompts: the driver's API registry entry, as the
    manifest's replay section records it."""

    chat_template: bool  # chat messages rendered with the chat template (else ids or text)
    special_tokens: bool  # the tokenizer's special tokens added to that render
    server_history: str | None  # the option that had the server keep the history, if on


# Runs written before the manifest recorded the rules: the four APIs of then, by name.
_BY_NAME_BEFORE = {"chat": (True, False), "messages": (True, False), "responses": (True, True)}


def prompt_space(replay: ReplaySettings) -> PromptSpace:
    """The run's prompt rules: as recorded, else (an older run) by its API's name."""
    if replay.chat_template is not None:
        return PromptSpace(replay.chat_template, bool(replay.special_tokens), replay.server_history)
    template, special = _BY_NAME_BEFORE.get(replay.api or "", (False, False))
    kept = replay.api == "responses" and replay.previous_response_id
    return PromptSpace(template, special, "previous_response_id" if kept else None)


def token_space(run, records: pd.DataFrame, tokenizer: str | None) -> TokenSpace:
    """How to count this run's prompts; with `keys` set when they can be counted in server tokens."""
    replay = run.replay
    api, fmt = replay.api, replay.prompt_format
    if api is None:
        return TokenSpace(
            "trace", False, "the run does not say which API it used (manifest replay.api)"
        )
    rules = prompt_space(replay)
    if not rules.chat_template and fmt == "tokens":
        return TokenSpace("trace", False, "token-id prompts: the server's tokens are the trace's")
    if rules.server_history:
        return TokenSpace(
            "trace",
            True,
            f"{rules.server_history}: the server kept the history (its own replies), so "
            "prompts cannot be rebuilt",
        )
    server, why_not = _server_tokenizer(tokenizer, replay)
    where = str(server.path) if server is not None else None
    if server is None or why_not is not None:
        return TokenSpace("trace", True, why_not or "no tokenizer", where)
    counter = _text_counter(replay.tokenizer, server)
    try:
        keys = _server_keys(run.trace, records, replay, rules, server, counter)
    except ChatTemplateError as exc:
        return TokenSpace("trace", True, f"chat template failed: {exc}", where)
    space = TokenSpace("server", False, _rendered_how(api, rules, server), where, keys=keys)
    _check_lengths(space, records)
    return space


def _server_tokenizer(
    tokenizer: str | None, replay: ReplaySettings
) -> tuple[ChatTokenizer | None, str | None]:
    """The server's tokenizer (the argument, else the run's setting) and why it cannot be used."""
    path = tokenizer or replay.tokenizer
    if path is not None and not Path(path).exists():
        if tokenizer is not None:
            raise InputError("no such tokenizer file or folder", path=path, field="--tokenizer")
        return None, (
            f"the run's tokenizer {path} is not there: the ideal counts trace tokens, scaled "
            "to each request's prompt_tokens (give harness analyze --tokenizer DIR)"
        )
    server = ChatTokenizer.load(path) if path is not None else None
    return server, _why_not_server(replay, server)


def _why_not_server(replay: ReplaySettings, server: ChatTokenizer | None) -> str | None:
    if server is None:
        return (
            "no tokenizer: the ideal counts trace tokens, scaled to each request's prompt_tokens "
            "(give harness analyze --tokenizer DIR)"
        )
    if prompt_space(replay).chat_template and not server.has_template:
        return (
            f"{server.path} has no chat template: the ideal counts trace tokens, scaled to each "
            "request's prompt_tokens"
        )
    if replay.history == "live":
        return "live history: the server's replies are not in the records, so prompts cannot be rebuilt"
    return None


def _text_counter(run_tokenizer: str | None, server: ChatTokenizer):
    """The counter the driver fitted segment texts with (the run's own tokenizer setting; the
    server's when that is gone: the prompt_tokens check then shows whether they differ)."""
    if run_tokenizer is None:
        return None
    run_path = Path(run_tokenizer)
    if not run_path.exists() or run_path.resolve() in (
        server.path.resolve(),
        server.path.resolve() / TOKENIZER_FILE,
    ):
        return server.count
    return ChatTokenizer.load(run_tokenizer).count


def _rendered_how(api: str, rules: PromptSpace, server: ChatTokenizer) -> str:
    if api == "chat":
        return f"chat messages rendered with the chat template of {server.path} and tokenized as the server does"
    if rules.chat_template:
        return (
            f"{api} requests rendered as the chat messages they were built from, with the chat "
            f"template of {server.path}, and tokenized as the server does"
        )
    return f"text prompts tokenized with {server.path}, special tokens added, as the server does"


def _server_keys(
    trace,
    records: pd.DataFrame,
    replay: ReplaySettings,
    rules: PromptSpace,
    server: ChatTokenizer,
    counter,
) -> list[bytes]:
    """Each record's prompt in server tokens, rebuilt in send order (a session's turns in order)."""
    sources: dict[int, RequestSource] = {}  # one per cycle of the trace (harness.trace.cycles)
    order = np.lexsort(
        (
            np.arange(len(records)),
            np.nan_to_num(records["t_sent"].to_numpy(dtype=float), nan=np.inf),
        )
    )
    sessions = records["session_id"].tolist()
    turns = records["turn"].to_numpy(dtype=float).astype(int).tolist()
    keys: list[bytes] = [b""] * len(records)
    for i in order.tolist():
        sid, cycle = split_cycled_id(sessions[i])
        if cycle not in sources:
            sources[cycle] = RequestSource(
                trace,
                api="chat" if rules.chat_template else "completions",
                prompt_format=replay.prompt_format,
                salt=cycle_salt(replay.salt, cycle),
                token_counter=counter,
            )
        prompt = sources[cycle].prompt(sid, turns[i])
        ids = (
            server.chat_ids(
                prompt.messages, tools=prompt.tools, special_tokens=rules.special_tokens
            )
            if prompt.messages is not None
            else server.text_ids(cast(str, prompt.body))  # a text prompt: chat or text api
        )
        keys[i] = token_key(ids)
    return keys


def _check_lengths(space: TokenSpace, records: pd.DataFrame) -> None:
    """Compare the server's `prompt_tokens` with the local count, request by request."""
    local = np.asarray([len(k) // ID_BYTES for k in space.keys or ()], dtype=np.float64)
    reported = records["prompt_tokens"].to_numpy(dtype=float)
    checked = ~np.isnan(reported)
    bad = checked & (reported != local)
    space.prompts_checked, space.mismatches = int(checked.sum()), int(bad.sum())
    if bad.any():
        i = int(bad.argmax())
        space.first_mismatch = {
            "request_id": str(records["request_id"].iloc[i]),
            "prompt_tokens": int(reported[i]),
            "local": int(local[i]),
        }
        space.approximate = True  # the walk's tokens are not all the server's
        space.reason += (
            f"; {space.mismatches} of {space.prompts_checked} prompt_tokens differ from the "
            "local count, so the ideal is approximate"
        )


def scale_to_server(records: pd.DataFrame) -> None:
    """Approximate: each trace-token ideal column times the request's server/trace prompt ratio."""
    reported = records["prompt_tokens"].to_numpy(dtype=float)
    expected = records["prompt_tokens_expected"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isnan(reported) | ~(expected > 0), 1.0, reported / expected)
    for column in ("cached_tokens_ideal", *WALK_COLUMNS):
        if column in records:
            records[column] = records[column].to_numpy(dtype=float) * ratio
