"""Deterministic content: what a server receives for each request of a trace.

Every prompt is a list of *segments* (salt, system prompt, each new input, each recorded output,
or imported hash-id blocks). A segment's content is a seeded function of (trace seed, segment key),
so equal keys mean identical content and a turn's prompt is, byte for byte, the previous turn's
prompt + its output + the new input. That is what makes prefix reuse real on a real server.

Content is a sequence of *words* from a fixed vocabulary of common English words, each about one
token for common BPE tokenizers. The same words give token ids (`TOKEN_BASE + word index`) for
`/v1/completions` token-id prompts, and text for chat messages. The reference engine's tokenizer
maps these words back to the same ids (see `encode_words` / `decode_ids`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.trace.model import Session, Trace
from harness.vocab import TOKEN_BASE, WORD_INDEX, WORDS

_WORD_ARRAY = np.array(WORDS, dtype=object)  # fancy indexing turns word ids into text in C
SALT_TOKENS = 8  # length of the per-run salt segment that starts every prompt when a salt is set

TokenCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Segment:
    key: tuple  # identity: equal keys have identical content
    length: int  # tokens
    role: str  # "system" | "user" | "assistant"


def _stable_hash(key: tuple) -> int:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _word_stream(key_hash: int, n: int) -> np.ndarray:
    """n word indices from a 64-bit key: SplitMix64 over a counter, vectorized.

    Seeding a numpy Generator costs tens of microseconds (its SeedSequence), more than a whole
    short segment; a counter-based mix needs no state, so the driver can materialize a prompt's
    new segments per request cheaply. Word i depends only on (key, i), so a shorter segment of
    the same key is a prefix of a longer one."""
    x = np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN + np.uint64(key_hash)
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    x ^= x >> np.uint64(31)
    return (x % np.uint64(len(WORDS))).astype(np.int32)


def encode_words(text: str) -> list[int]:
    """Token ids of a text written in the content vocabulary (unknown words raise KeyError)."""
    return [TOKEN_BASE + WORD_INDEX[w] for w in text.split()]


def decode_ids(ids) -> str:
    return " ".join(WORDS[i - TOKEN_BASE] for i in ids)


def vocab_token_id_range() -> tuple[int, int]:
    """[low, high) of the token ids content uses."""
    return TOKEN_BASE, TOKEN_BASE + len(WORDS)


class Content:
    """Materializes the prompts of one trace. Cheap to build; segments are cached (LRU)."""

    def __init__(
        self,
        trace: Trace,
        *,
        salt: str | None = None,
        token_counter: TokenCounter | None = None,
        cache_size: int = 4096,
    ) -> None:
        self.trace = trace
        self.seed = trace.header.seed or 0
        self.salt = salt
        self.block_size = trace.header.block_size
        self._count = token_counter
        self._words: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._texts: OrderedDict[tuple, str] = OrderedDict()
        self._cache_size = cache_size

    def share_caches(self, other: Content) -> None:
        """Use `other`'s word and text caches: `other` is the same trace under another salt (a
        replay's other pass over it). A segment's words do not depend on the salt (the salt
        segment's own key holds it), so the passes share one bounded cache instead of each
        filling its own."""
        self._words, self._texts = other._words, other._texts

    # ---- segments -------------------------------------------------------------------------

    def segments(self, session_id: str, turn: int) -> list[Segment]:
        """The prompt of `turn` of a session as segments, in order."""
        s = self.trace.session(session_id)
        head = [Segment(("salt", self.salt), SALT_TOKENS, "system")] if self.salt else []
        t = s.turns[turn]
        if t.hash_ids is not None:
            return head + self._block_segments(s, turn)
        return head + self._context(s, turn) + self._new_input(s, turn)

    def appends_to_previous(self, session_id: str, turn: int) -> bool:
        """Whether turn `turn`'s prompt is the previous turn's plus `new_segments` (block-mode
        turns from imported traces carry whole prompts instead)."""
        turns = self.trace.session(session_id).turns
        return turn > 0 and turns[turn].hash_ids is None and turns[turn - 1].hash_ids is None

    def new_segments(self, session_id: str, turn: int) -> list[Segment]:
        """What turn `turn` (> 0, not block-mode) appends to the previous turn's prompt."""
        s = self.trace.session(session_id)
        return [self.output_segment(session_id, turn - 1), *self._new_input(s, turn)]

    def output_segment(self, session_id: str, turn: int) -> Segment:
        s = self.trace.session(session_id)
        return Segment(("out", s.id, turn), s.turns[turn].output_tokens, "assistant")

    def prompt_length(self, session_id: str, turn: int) -> int:
        return sum(seg.length for seg in self.segments(session_id, turn))

    def _context(self, s: Session, turn: int) -> list[Segment]:
        """Everything before turn `turn`'s new input: inherited context + own earlier turns."""
        if s.mode == "fork" and s.parent is not None:
            parent = self.trace.session(s.parent)
            fork = s.fork_turn or 0
            base = self._context(parent, fork) + self._new_input(parent, fork)
            base.append(
                Segment(("out", parent.id, fork), parent.turns[fork].output_tokens, "assistant")
            )
        else:
            base = (
                [Segment(("sys", s.system_id), s.system_tokens, "system")]
                if s.system_tokens
                else []
            )
        for j in range(turn):
            base += self._new_input(s, j)
            base.append(Segment(("out", s.id, j), s.turns[j].output_tokens, "assistant"))
        return base

    def _new_input(self, s: Session, turn: int) -> list[Segment]:
        """A turn's new input; after a join it starts with the subagents' final outputs."""
        remaining = s.turns[turn].new_input_tokens
        segs: list[Segment] = []
        if turn > 0:
            for child_id in s.turns[turn - 1].spawns:
                child = self.trace.session(child_id)
                last = len(child.turns) - 1
                n = min(child.turns[last].output_tokens, remaining)
                if n > 0:
                    segs.append(Segment(("out", child.id, last), n, "user"))
                    remaining -= n
        if remaining > 0 or not segs:
            segs.append(Segment(("in", s.id, turn), remaining, "user"))
        return segs

    def _block_segments(self, s: Session, turn: int) -> list[Segment]:
        t = s.turns[turn]
        assert t.hash_ids is not None and t.input_tokens is not None
        b, left, segs = self.block_size, t.input_tokens, []
        for h in t.hash_ids:
            if left <= 0:
                break
            segs.append(Segment(("blk", h), min(b, left), "user"))
            left -= b
        if left > 0:
            segs.append(Segment(("tail", s.id, turn), left, "user"))
        return segs

    # ---- words, token ids, text ------------------------------------------------------------

    def segment_words(self, seg: Segment) -> np.ndarray:
        """Word indices of a segment. A block segment shorter than the block is a prefix of it."""
        full = self.block_size if seg.key[0] == "blk" else seg.length
        cached = self._words.get(seg.key)
        if cached is None or len(cached) < full:
            cached = _word_stream(_stable_hash((self.seed, seg.key)), full)
            self._remember(self._words, seg.key, cached)
        return cached[: seg.length]

    def segment_token_ids(self, seg: Segment) -> np.ndarray:
        return self.segment_words(seg) + TOKEN_BASE

    def segment_text(self, seg: Segment) -> str:
        key = (seg.key, seg.length)
        text = self._texts.get(key)
        if text is None:
            text = " ".join(_WORD_ARRAY[self.segment_words(seg)].tolist())
            if self._count is not None and seg.length > 0:
                text = self._fit(seg, text, self._count)
            self._remember(self._texts, key, text)
        return text

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

    def _remember(self, cache: OrderedDict, key, value) -> None:
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

    def messages(self, session_id: str, turn: int) -> list[dict]:
        """OpenAI chat messages of a turn's prompt (see `chat_messages`)."""
        return chat_messages(self.segments(session_id, turn), self.segment_text)


def chat_messages(segments, text_of: Callable[[Segment], str]) -> list[dict]:
    """Segments -> chat messages. Consecutive system or user segments form one message (salt +
    system prompt; subagent results + tool output); every assistant output is its own message,
    even an empty one, so that turn k's messages stay a prefix of turn k+1's."""
    msgs: list[dict] = []
    for seg in segments:
        if seg.length == 0 and seg.role != "assistant":
            if not msgs or msgs[-1]["role"] != seg.role:
                msgs.append({"role": seg.role, "content": ""})
            continue
        text = text_of(seg) if seg.length else ""
        if msgs and msgs[-1]["role"] == seg.role and seg.role != "assistant":
            msgs[-1]["content"] = f"{msgs[-1]['content']} {text}" if msgs[-1]["content"] else text
        else:
            msgs.append({"role": seg.role, "content": text})
    return msgs


def load_hf_token_counter(path: str) -> TokenCounter:
    """A token counter from a local Hugging Face tokenizer folder or its `tokenizer.json` (needs
    `tokenizers`): tokens of a text without added special tokens."""
    from harness.trace.chat_tokens import ChatTokenizer

    return ChatTokenizer.load(path).count
