"""Deterministic content: what a server receives for each request of a trace.

Every prompt is a list of *segments* (salt, system prompt, each new input, each recorded output,
or imported hash-id blocks). A segment's content is a seeded function of (trace seed, segment key),
so equal keys mean identical content and a turn's prompt is, byte for byte, the previous turn's
prompt + its output + the new input. That is what makes prefix reuse real on a real server.

What a segment says follows the trace's `content` (docs/traces.md, "Content"):

- `words` (the default): a sequence of words from a fixed vocabulary of common English words,
  each about one token for common BPE tokenizers. The same words give token ids (`TOKEN_BASE +
  word index`) for `/v1/completions` token-id prompts, and text for chat messages. The reference
  engine's tokenizer maps these words back to the same ids (see `encode_words` / `decode_ids`).
- `code`: the Python standard library's source, shaped as what an agent reads and writes
  (`harness.trace.code_text`); with a tokenizer, token-id prompts are that text's own ids.

With `turn_form: tools` a chat prompt is tool-shaped (`harness.trace.tool_calls`): each turn's
output an assistant tool call, the next turn's new input its result (role `tool`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from harness.errors import InputError
from harness.trace import code_text, tool_calls
from harness.trace.chat_tokens import ChatTokenizer
from harness.trace.model import Trace
from harness.trace.profile import content_form
from harness.trace.segments import (
    SALT_TOKENS as SALT_TOKENS,  # re-exported: content is where callers look
)
from harness.trace.segments import Layout, Segment
from harness.vocab import TOKEN_BASE, WORD_INDEX, WORDS

_WORD_ARRAY = np.array(WORDS, dtype=object)  # fancy indexing turns word ids into text in C

TokenCounter = Callable[[str], int]
TokenEncoder = Callable[[str], list[int]]
WORDS_ONLY = frozenset(
    {"salt", "say"}
)  # segments in words whatever the content: salts, explanations


def _stable_hash(key: tuple) -> int:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _u64(value: int) -> np.ndarray:
    """A constant as a 0-d uint64 array: numpy 2 spends ~0.3 us less per call on it than on a
    scalar (`np.uint64`), and a short segment is ten such calls. Read-only: it is shared."""
    const = np.array(value, dtype=np.uint64)
    const.flags.writeable = False
    return const


_MIX1, _MIX2 = _u64(0xBF58476D1CE4E5B9), _u64(0x94D049BB133111EB)
_S27, _S30, _S31 = _u64(27), _u64(30), _u64(31)
_N_WORDS = _u64(len(WORDS))
_STEPS = np.arange(1, 4097, dtype=np.uint64) * _GOLDEN  # the counter's first 4096 steps, mixed in


def _word_stream(key_hash: int, n: int) -> np.ndarray:
    """n word indices from a 64-bit key: SplitMix64 over a counter, vectorized.

    Seeding a numpy Generator costs tens of microseconds (its SeedSequence), more than a whole
    short segment; a counter-based mix needs no state, so the driver can materialize a prompt's
    new segments per request cheaply. Word i depends only on (key, i), so a shorter segment of
    the same key is a prefix of a longer one. In place, with the constants made once: a short
    segment's cost is numpy's per-call overhead, so each call and temporary saved counts."""
    steps = _STEPS[:n] if n <= len(_STEPS) else np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN
    x = steps + np.uint64(key_hash)
    t = x >> _S30
    x ^= t
    x *= _MIX1
    np.right_shift(x, _S27, out=t)
    x ^= t
    x *= _MIX2
    np.right_shift(x, _S31, out=t)
    x ^= t
    x %= _N_WORDS
    return x.astype(np.int32)


def word_list(key_hash: int, n: int) -> list[str]:
    """n words of the content vocabulary from a 64-bit key."""
    return _WORD_ARRAY[_word_stream(key_hash, n)].tolist()


def encode_words(text: str) -> list[int]:
    """Token ids of a text written in the content vocabulary (unknown words raise KeyError)."""
    return [TOKEN_BASE + WORD_INDEX[w] for w in text.split()]


def decode_ids(ids) -> str:
    return " ".join(WORDS[i - TOKEN_BASE] for i in ids)


def vocab_token_id_range() -> tuple[int, int]:
    """[low, high) of the token ids content uses."""
    return TOKEN_BASE, TOKEN_BASE + len(WORDS)


def _kept(seg: Segment) -> bool:
    """A recorded chunk whose real text the recording kept (`harness.trace.recorded`)."""
    return seg.key[0] == "rec" and len(seg.key) == 3


class Content(Layout):
    """Materializes the prompts of one trace. Cheap to build; segments are cached (LRU)."""

    def __init__(
        self,
        trace: Trace,
        *,
        salt: str | None = None,
        token_counter: TokenCounter | None = None,
        token_encoder: TokenEncoder | None = None,
        cache_size: int = 4096,
    ) -> None:
        self.trace = trace
        self.seed = trace.header.seed or 0
        self.salt = salt
        self.block_size = trace.header.block_size
        self.kind, self.turn_form = content_form(trace.header.meta)
        if self.kind not in ("words", "code") or self.turn_form not in ("plain", "tools"):
            raise InputError(
                f"content {self.kind!r} / turn_form {self.turn_form!r}: expected words or code, "
                "plain or tools",
                field="meta.knobs",
            )
        self._count = token_counter
        self._encode = token_encoder
        self._words: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._texts: OrderedDict[tuple, str] = OrderedDict()
        self._plans = {}
        self._cache_size = cache_size

    def share_caches(self, other: Content) -> None:
        """Use `other`'s word and text caches: `other` is the same trace under another salt (a
        replay's other pass over it). A segment's words do not depend on the salt (the salt
        segment's own key holds it), so the passes share one bounded cache instead of each
        filling its own. Tool plans do not depend on the salt either (a seeded function of
        the trace and the turn): planned once for every pass."""
        self._words, self._texts, self._plans = other._words, other._texts, other._plans

    def prepare(self) -> None:
        """Load now what the first prompt would otherwise load in the middle of a run: code
        content's index of the standard library (~0.4 s on the 2-core machine, which made the
        first requests of every such run ~0.4-0.7 s late)."""
        if self.kind == "code":
            code_text.corpus()

    # ---- words, token ids, text ------------------------------------------------------------

    def _is_code(self, seg: Segment) -> bool:
        return self.kind == "code" and seg.key[0] not in WORDS_ONLY

    def segment_words(self, seg: Segment) -> np.ndarray:
        """Word indices of a segment. A block segment shorter than the block is a prefix of it."""
        full = self.block_size if seg.key[0] == "blk" else seg.length
        cached = self._words.get(seg.key)
        if cached is None or len(cached) < full:
            cached = _word_stream(_stable_hash((self.seed, seg.key)), full)
            self.remember(self._words, seg.key, cached)
        return cached[: seg.length]

    def segment_token_ids(self, seg: Segment) -> np.ndarray:
        if _kept(seg) and self._encode is not None:
            return self._fitted_ids(seg)
        if not self._is_code(seg):
            return self.segment_words(seg) + TOKEN_BASE
        key = ("ids", seg.key, seg.length)
        cached = self._words.get(key)
        if cached is None:
            cached = self._code_ids(seg)
            self.remember(self._words, key, cached)
        return cached

    def _code_ids(self, seg: Segment) -> np.ndarray:
        """Code as token ids: one per piece, or the tokenizer's own ids of the fitted text
        (padded with its last id in the rare case the fit fell short, so lengths stay exact)."""
        if self._encode is None:
            return code_text.piece_ids(self._code_pieces(seg, seg.length))
        return self._fitted_ids(seg)

    def _fitted_ids(self, seg: Segment) -> np.ndarray:
        assert self._encode is not None
        ids = self._encode(self.segment_text(seg))[: seg.length]
        ids += (ids[-1:] or [TOKEN_BASE]) * (seg.length - len(ids))
        return np.asarray(ids, dtype=np.int64)

    def segment_text(self, seg: Segment) -> str:
        if _kept(seg):
            return seg.key[2]  # a recording that kept its content: the real text
        key = (seg.key, seg.length)
        text = self._texts.get(key)
        if text is None:
            if self._is_code(seg):
                text = self._code_text(seg)
            else:
                text = " ".join(_WORD_ARRAY[self.segment_words(seg)].tolist())
                if self._count is not None and seg.length > 0:
                    text = self._fit(seg, text, self._count)
            self.remember(self._texts, key, text)
        return text

    def _code_pieces(self, seg: Segment, n: int) -> list[str]:
        return code_text.code_pieces(self._code_kind(seg), _stable_hash((self.seed, seg.key)), n)

    def _code_text(self, seg: Segment) -> str:
        if self._count is None:
            return "".join(self._code_pieces(seg, seg.length))
        return code_text.fit(lambda m: self._code_pieces(seg, m), seg.length, self._count)

    def _code_kind(self, seg: Segment) -> str:
        """Which document a code segment is: a tool result in the form its tool returns."""
        tag = seg.key[0]
        if tag == "arg":
            return tool_calls.PAYLOAD_KIND.get(seg.key[4], "source")
        if tag != "in" or seg.key[2] == 0:
            return "source"  # system prompts, tasks, outputs, imported blocks
        if self.turn_form == "tools":
            call = self.plan(seg.key[1], seg.key[2] - 1)
            return "source" if call is None or call.name == "Task" else call.result_kind
        return ("read", "grep", "test", "edit")[_stable_hash((self.seed, seg.key, "kind")) % 4]

    def _fit(self, seg: Segment, text: str, count: TokenCounter) -> str:
        """Make the text exactly `seg.length` tokens for the user's tokenizer.

        Pre-tokenizers split on spaces, so a text's count is close to the sum of its words'
        counts: take the segment's words while they fit, fill the rest with one-token words,
        then check the whole text and correct word by word."""
        cost, ones = self._word_costs(count)
        words, total = [], 0
        for w in text.split():
            if total + cost[w] > seg.length:
                break
            words.append(w)
            total += cost[w]
        rng = np.random.default_rng([self.seed, _stable_hash(seg.key), 1])
        fill = ones or list(WORDS)
        for _ in range(4 * seg.length + 16):
            n = count(" ".join(words)) if words else 0
            if n == seg.length:
                break
            if n > seg.length and words:
                words.pop()
            else:
                words.append(fill[int(rng.integers(len(fill)))])
        return " ".join(words)

    def _word_costs(self, count: TokenCounter) -> tuple[dict[str, int], list[str]]:
        if not hasattr(self, "_costs"):
            self._costs = {w: count(w) for w in WORDS}
            self._ones = [w for w in WORDS if self._costs[w] == 1]
        return self._costs, self._ones

    def remember(self, cache: OrderedDict, key, value) -> None:
        """Keep `key` in an LRU `cache` of this content's size."""
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._cache_size:
            cache.popitem(last=False)

    def prompt_token_ids(self, session_id: str, turn: int) -> list[int]:
        segs = self.segments(session_id, turn)
        if not segs:
            return []
        return np.concatenate([self.segment_token_ids(s) for s in segs]).tolist()

    def prompt_text(self, session_id: str, turn: int) -> str:
        """The prompt as one text (for `/v1/completions` with a text prompt)."""
        return " ".join(self.segment_text(s) for s in self.segments(session_id, turn) if s.length)

    def output_text(self, session_id: str, turn: int) -> str:
        return self.segment_text(self.output_segment(session_id, turn))

    @property
    def counter(self) -> TokenCounter | None:
        """The tokenizer's count that texts are fitted to, when the run has one."""
        return self._count


def load_hf_token_counter(path: str) -> TokenCounter:
    """A token counter from a local Hugging Face tokenizer folder or its `tokenizer.json` (needs
    `tokenizers`): tokens of a text without added special tokens."""
    return ChatTokenizer.load(path).count


def load_hf_token_encoder(path: str) -> TokenEncoder:
    """Token ids of a text (no special tokens) from the same kind of folder: what `content:
    code` sends as token-id prompts when the run names a tokenizer."""
    tokenizer = ChatTokenizer.load(path).tokenizer
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
