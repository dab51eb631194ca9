"""Choosing an endpoint for each request when a run targets several.

- `round_robin`: endpoints in turn, per request.
- `least_outstanding`: the endpoint with the fewest requests in flight (ties rotate).
- `session_sticky`: consistent hashing of the session's key onto a ring of virtual nodes, so a
  session's turns land where its prefix is cached and adding an endpoint moves ~1/n sessions.
  The key is the session id, or the root session's id when subagents follow their parent.
- `longest_prefix`: the endpoint that was sent the longest leading part of the prompt, by the
  router's own picture of each endpoint's cache (`prefix_routing.py`); else the least loaded.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence

from harness.driver.prefix_routing import PrefixIndex, chunk_names, prompt_bytes

POLICIES = ("round_robin", "least_outstanding", "session_sticky", "longest_prefix")
VIRTUAL_NODES = 128


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class Router:
    def __init__(self, endpoints: Sequence[str], policy: str = "round_robin") -> None:
        if policy not in POLICIES:
            raise ValueError(f"routing must be one of {', '.join(POLICIES)}, got {policy!r}")
        if not endpoints:
            raise ValueError("at least one endpoint is needed")
        self.policy = policy
        self.n = len(endpoints)
        self.outstanding = [0] * self.n
        self._next = 0
        ring = sorted(
            (_hash(f"{name}#{v}"), i)
            for i, name in enumerate(endpoints)
            for v in range(VIRTUAL_NODES)
        )
        self._ring_keys = [h for h, _ in ring]
        self._ring_nodes = [i for _, i in ring]
        self.prefixes = PrefixIndex(self.n) if policy == "longest_prefix" else None

    def pick(self, sticky_key: str, prompt: object = None) -> int:
        """The endpoint for the next request (`prompt`: its token ids, text or messages, for
        `longest_prefix`); counts it as outstanding until `release`."""
        if self.n == 1:
            i = 0
        elif self.policy == "round_robin":
            i = self._rotate()
        elif self.policy == "least_outstanding":
            i = self._least()
        elif self.policy == "longest_prefix":
            i = self._longest_prefix(prompt)
        else:
            i = self.ring_lookup(sticky_key)
        self.outstanding[i] += 1
        return i

    def _longest_prefix(self, prompt: object) -> int:
        assert self.prefixes is not None  # made with the policy
        names = chunk_names(prompt_bytes(prompt))
        matched = [self.prefixes.match(i, names) for i in range(self.n)]
        best = max(matched)
        if best == 0:
            i = self._least()
        else:  # the least loaded of those holding the most, scanning from a rotating start
            start = self._rotate()
            order = [(start + k) % self.n for k in range(self.n)]
            i = min((j for j in order if matched[j] == best), key=self.outstanding.__getitem__)
        self.prefixes.sent(i, names)
        return i

    def release(self, i: int) -> None:
        self.outstanding[i] -= 1

    def _rotate(self) -> int:
        i = self._next
        self._next = (i + 1) % self.n
        return i

    def _least(self) -> int:
        start = self._rotate()  # rotating the scan start spreads ties
        best = start
        for k in range(1, self.n):
            j = (start + k) % self.n
            if self.outstanding[j] < self.outstanding[best]:
                best = j
        return best

    def ring_lookup(self, key: str) -> int:
        pos = bisect.bisect(self._ring_keys, _hash(key)) % len(self._ring_keys)
        return self._ring_nodes[pos]
