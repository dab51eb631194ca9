"""Every output token placed: a stream whose events may carry several tokens each, placed by text.

A speculating server (vLLM with n-gram drafts) emits up to k+1 tokens per step, in one event.
Where the server reports usage on every event (vLLM's `stream_options.continuous_usage_stats`,
asked for by default on chat and completions, `target.continuous_usage`) each event's tokens
are exact. Elsewhere (Messages and Responses streams, other servers) an event counts one token,
and the final usage's `completion_tokens` says how many more there were. With the run's
tokenizer (`workload.tokenizer`) `PlacingSink` gives those extra tokens to the events whose text
holds them: each event's share is what its text tokenizes to beyond what it counted, the
extras split by largest remainder when the texts account for more than the usage says. Tokens
no text accounts for stay unplaced, and the analyzer counts them (analysis/streamed.py).

The chunks are held until the request's usage arrives (the events keep their own arrival
times) and are then passed on with their placed counts; a failure passes them on as they came.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.driver.target import Event, Sink, Usage

TokenCounter = Callable[[str], int]


def place(counted: list[int], texts: list[str], total: int, count: TokenCounter) -> list[int]:
    """Per-event tokens summing to at most `total`: each event's `counted` plus its share of the
    extra tokens, in proportion to what its text tokenizes to beyond its count."""
    extra = total - sum(counted)
    if extra <= 0:
        return counted
    beyond = [max(0, count(t) - c) if t else 0 for c, t in zip(counted, texts, strict=True)]
    held = sum(beyond)
    if held <= extra:  # the texts hold no more than the usage says: each gets all of its own
        return [c + b for c, b in zip(counted, beyond, strict=True)]
    shares = [b * extra / held for b in beyond]
    given = [int(s) for s in shares]
    order = sorted(range(len(shares)), key=lambda i: given[i] - shares[i])  # largest remainder
    for i in order[: extra - sum(given)]:
        given[i] += 1
    return [c + g for c, g in zip(counted, given, strict=True)]


class PlacingSink:
    """A sink in front of the record's: chunks held until the usage, then placed and passed on."""

    __slots__ = ("sink", "count", "chunks")

    def __init__(self, sink: Sink, count: TokenCounter) -> None:
        self.sink, self.count = sink, count
        self.chunks: list[tuple[float, int, str]] = []

    def chunk(self, t: float, tokens: int, text: str) -> None:
        self.chunks.append((t, tokens, text))

    def event(self, ev: Event) -> None:
        if self.chunks:
            counted = [c[1] for c in self.chunks]
            total = ev.completion_tokens if isinstance(ev, Usage) else None
            if isinstance(total, int):
                counted = place(counted, [c[2] for c in self.chunks], total, self.count)
            for (t, _, text), tokens in zip(self.chunks, counted, strict=True):
                self.sink.chunk(t, tokens, text)
            self.chunks = []
        self.sink.event(ev)
