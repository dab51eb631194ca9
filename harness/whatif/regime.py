"""How close a what-if's pool is to what the run needs at once, in the pool's own pages.

- The largest request: the pages the run's largest request (prompt and reply) holds at once in
  this server's pool (`engine.pages_for`: every block of a full-attention group, a sliding one's
  at most its bound), plus the null block where the server has one. A pool near it admits one
  request at a time, and which request reaches the pool first decides what is evicted.
- The working set: the most pages that the run's live sessions' prompts would hold, cached, at
  once: at each send, every session that has sent and will send again keeps its latest prompt,
  each distinct block once (forks and system prompts share theirs), a full-attention group every
  block, a sliding-window group the window's blocks before the prompt's end
  (`cdiv(window - 1, block)`, what a hit needs there). A pool under it cannot keep every live
  session's prefix, so each turn's hit depends on the order of events around it.

Both come from the run's own requests at their measured send times; neither replays anything.

The interval (`interval`) around a predicted hit rate holds what the draws' spread does not: its
half-width is `Z` draws' sds combined (root of the sum of squares) with a floor (`FLOOR_PP`: the
cache model's own error and a real server's run-to-run spread where nothing thrashes, half a
point each on the checks so far) and a regime term that grows as the pool nears the largest
request (`LARGEST_PP` at 1.0x, none from `THRASHING_BELOW`x up) and as it nears the working set
(`WORKING_SET_PP` from 1.0x down, none from `CROWDED_BELOW`x up). Around the working set the pool
is bistable: a turn that misses recomputes its whole prompt, the server falls behind, sessions
overlap more and evict each other more, or none of that happens; two vLLM runs of one trace at
0.97x the working set gave 60.9 and 72.9 %, and the model's draws spread far less
(docs/measurements/whatif-vllm.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.engine.config import FULL, EngineConfig
from harness.engine.engine import pages_for
from harness.engine.prefix_lookup import ROOT_HASH, block_hash
from harness.whatif.requests import Prompts, ReplayRequest

THRASHING_BELOW = 1.5  # x the largest request: where the what-if's prediction is unreliable
CROWDED_BELOW = 1.2  # x the working set: where which prefixes survive turns on timing
Z = 2.0  # draws' sds in the interval
FLOOR_PP = 1.0  # hit-rate points, at any pool
LARGEST_PP = 8.0  # regime term at a pool of 1.0x the largest request, hit-rate points
WORKING_SET_PP = 12.0  # ... at a pool of up to 1.0x the working set


@dataclass(frozen=True)
class Regime:
    pool: int  # pages, the null block included
    largest_request: int
    working_set: int

    @property
    def over_largest(self) -> float:
        return self.pool / self.largest_request

    @property
    def over_working_set(self) -> float:
        return self.pool / self.working_set if self.working_set else float("inf")

    @property
    def thrashing(self) -> bool:
        return self.over_largest < THRASHING_BELOW

    @property
    def crowded(self) -> bool:
        return self.over_working_set < CROWDED_BELOW

    def words(self) -> str:
        where = (
            f"{self.over_largest:.2f}x the largest request ({self.largest_request} pages), "
            f"{self.over_working_set:.2f}x the working set ({self.working_set} pages)"
        )
        if self.thrashing:
            return (
                f"thrashing: the pool is {where}; prediction unreliable below "
                f"~{THRASHING_BELOW}x the largest request (see the interval)"
            )
        if self.crowded:
            return (
                f"crowded: the pool is {where}; which prefixes survive turns on the order of "
                f"events, prediction unreliable below ~{CROWDED_BELOW}x the working set (see "
                "the interval)"
            )
        return f"holds the working set: the pool is {where}"

    def as_dict(self) -> dict:
        return {
            "pool_pages": self.pool,
            "largest_request_pages": self.largest_request,
            "working_set_pages": self.working_set,
            "pool_over_largest_request": self.over_largest,
            "pool_over_working_set": self.over_working_set,
            "thrashing": self.thrashing,
            "crowded": self.crowded,
            "words": self.words(),
        }


def regime(config: EngineConfig, requests: list[ReplayRequest], prompts: Prompts) -> Regime:
    """The pool of `config` against the run's largest request and working set (module
    docstring)."""
    null = int(config.null_block)
    sizes = [len(prompts.token_ids(r.session, r.turn)) for r in requests]
    largest = max(
        (pages_for(config, n + r.gen_tokens) for n, r in zip(sizes, requests, strict=True)),
        default=0,
    )
    return Regime(config.total_blocks, largest + null, working_set(config, requests, prompts))


def working_set(config: EngineConfig, requests: list[ReplayRequest], prompts: Prompts) -> int:
    """The most pages the live sessions' latest prompts hold at once (module docstring)."""
    kinds = [g.kind for g in config.model.kv_groups]
    groups = (kinds.count(FULL), len(kinds) - kinds.count(FULL))
    window = -(-(config.model.sliding_window - 1) // config.block_size)
    last: dict[str, float] = {}
    for r in requests:
        last[r.session] = max(last.get(r.session, r.t_sent), r.t_sent)
    latest: dict[str, list[bytes]] = {}
    peak = 0
    for r in sorted(requests, key=lambda r: r.t_sent):
        latest[r.session] = _chain(prompts.token_ids(r.session, r.turn), config.block_size)
        live = [c for s, c in latest.items() if last[s] >= r.t_sent]
        peak = max(peak, _pages(live, groups, window))
    return peak


def _pages(chains: list[list[bytes]], groups: tuple[int, int], window: int) -> int:
    """Pages that keep these prompts cached: each distinct block once in every full-attention
    group, each distinct window block once in every sliding one."""
    blocks = {h for c in chains for h in c}
    tails = {h for c in chains for h in c[-window:]} if window else set()
    return groups[0] * len(blocks) + groups[1] * len(tails)


def _chain(ids: np.ndarray, block_size: int) -> list[bytes]:
    """The hashes of a prompt's full blocks, each over its parent's."""
    data = np.asarray(ids, dtype="<i4").tobytes()
    width, parent, out = block_size * 4, ROOT_HASH, []
    for start in range(0, len(data) - width + 1, width):
        parent = block_hash(parent, data[start : start + width])
        out.append(parent)
    return out


def interval(mean: float, sd: float, r: Regime) -> dict:
    """The predicted hit's interval: `Z` draws' sds combined with the floor and the regime term
    (module docstring), clipped to [0, 1]; each part in hit-rate points."""
    near = min(max((THRASHING_BELOW - r.over_largest) / (THRASHING_BELOW - 1), 0.0), 1.0)
    under = min(max((CROWDED_BELOW - r.over_working_set) / (CROWDED_BELOW - 1), 0.0), 1.0)
    regime_pp = LARGEST_PP * near + WORKING_SET_PP * under
    half = math.hypot(Z * 100 * sd, regime_pp, FLOOR_PP)
    return {
        "cache_hit_rate": [max(mean - half / 100, 0.0), min(mean + half / 100, 1.0)],
        "draws_pp": Z * 100 * sd,
        "regime_pp": regime_pp,
        "floor_pp": FLOOR_PP,
        "half_width_pp": half,
    }
