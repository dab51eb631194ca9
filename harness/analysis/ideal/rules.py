"""The server's systematic prefix-cache rules, detected from its records as its granularity is.

A rule names missed tokens only where the records show it (docs/metrics.md, "Where missed tokens
went"). Each rule has *cases*: requests whose reported `cached_tokens` tests it, each one fitting
it or against it. A rule is `detected` from MIN_CASES fitting cases with none against,
`contradicted` by any case against it, else it has `too few` cases; the two rules the ideal is
defined with (granularity, prompt−1 cap) are then `assumed`. Per request, `analysis.cache` places
every prompt token at a position; the boundaries (`Bounds`) are, in order:

    0 ≤ kept ≤ held ≤ ready ≤ served ≤ ideal ≤ whole ≤ shared ≤ prompt

`kept`, `held`, `ready`: the ideal hit (in blocks, capped at prompt − 1) over what an earlier
request computed on this endpoint with a whole-block prompt's last block dropped, over all it
computed there, over all that finished prefill anywhere; `served`: the ideal in the records' own
block where that is coarser than the one the ideal is counted in (`--block-size` finer than the
server's), else the ideal; `whole`: `shared` in whole blocks.

- last_block: the last block of a prompt of a whole number of blocks is never kept (vLLM 0.32's
  CPU build, measured: docs/metrics.md). Case: a request whose whole ideal hit was computed on its
  endpoint (held = ideal) and that the rule would cost a block (kept < held): fits when it hit
  exactly `kept`, against when it hit more (a hit beyond the ideal, a cache warm from before the
  run, tests nothing).
- prompt_cap: at most prompt − 1 tokens are served, so a prompt shared whole computes its last
  token, with blocks its whole last block (`ideal < whole`). Case: such a request; fits when it
  hit the ideal, against when it hit more. Any request that hit its whole prompt is against.
- no_hits: the server never served a hit. Case: a request with something computed on its
  endpoint to hit (held > 0): fits when it hit nothing; any request that hit is against.
- granularity: hits come in whole blocks (`analysis.ideal.granularity`): `detected` when the
  records' block is a multiple of the one used, `contradicted` when not, `reported` by /metrics,
  `given` by --block-size, else `assumed`.

A rule the server's own source states (`KNOWN`, by the server's /v1/models `owned_by`, every
endpoint's) is `known` from one fitting case with none against: the records then confirm what is
read, they need not show it three times. A run that followed two whole-block prompts on vLLM
0.32 serving Gemma 3 (nothing evicted) missed 128 tokens after each, and was `too few` before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_CASES = 3
RULES = ("granularity", "prompt_cap", "last_block", "no_hits")
IN_THE_IDEAL = ("granularity", "prompt_cap")
# Rules read from a server's source, by its /v1/models `owned_by`: where each comes from.
KNOWN: dict[str, dict[str, str]] = {
    "vllm": {
        # vllm/v1/core/kv_cache_coordinator.py `replay_boundaries`, single_type_kv_cache_manager.py
        # `SlidingWindowManager.reachable_block_mask`: with `prefix_cache_retention_interval` 0 (its
        # default) a sliding-window group keeps the window ending at the aligned `prompt - 1` only,
        # so a whole-block prompt's last block is freed unhashed in those groups, and a longer
        # prompt's hit (the shortest over the groups) stops a block short of it.
        "last_block": "vLLM 0.32 keeps a sliding-window layer's KV at prompt - 1 only "
        "(replay_boundaries), so on a model with sliding-window layers (Gemma 3) the last "
        "block of a whole-block prompt is never kept",
    },
}
BOUNDS = ("zero", "kept", "held", "ready", "served", "ideal", "whole", "shared", "prompt")


@dataclass(frozen=True)
class Bounds:
    """Per request, the token positions that split its prompt (module docstring), shape (8, n)."""

    at: np.ndarray

    def __getattr__(self, name: str) -> np.ndarray:
        if name in BOUNDS:
            return self.at[BOUNDS.index(name)]
        raise AttributeError(name)


def rule_text(name: str, block_size: int | None) -> str:
    block = f"{block_size}-token " if block_size else ""
    return {
        "granularity": f"hits come in whole {block}blocks",
        "prompt_cap": "at most prompt - 1 tokens are served: a prompt shared whole computes"
        f" its last {block}block",
        "last_block": f"the last {block}block of a prompt of a whole number of blocks is never kept",
        "no_hits": "the server never served a hit (prefix caching off?)",
    }[name]


def cases(b: Bounds, hit: np.ndarray, reported: np.ndarray) -> dict[str, np.ndarray]:
    """Per request and rule: 1 a case that fits, -1 one against, 0 not a case."""
    within = reported & (hit <= b.served)  # a hit beyond the ideal was warm from before the run
    last = within & (b.kept < b.held) & (b.held == b.served)
    cap = reported & (b.shared >= b.prompt) & (b.ideal < b.whole)
    whole_hit = reported & (hit >= b.prompt) & (b.prompt > 0)
    return {
        "last_block": _case(last & (hit == b.kept), last & (hit > b.kept)),
        "prompt_cap": _case(cap & (hit == b.served), (cap & (hit > b.ideal)) | whole_hit),
        "no_hits": _case(reported & (b.held > 0) & (hit == 0), reported & (hit > 0)),
    }


def _case(fits: np.ndarray, against: np.ndarray) -> np.ndarray:
    return np.where(against, -1, np.where(fits, 1, 0)).astype(np.int8)


def statuses(
    case_columns: dict[str, np.ndarray],
    granularity: dict | None,
    known: dict[str, str] | None = None,
) -> dict[str, dict]:
    """Each rule's status and its case counts (`granularity`: `Granularity.as_dict()`; `known`:
    the rules the server's source states, `known_rules`)."""
    out = {"granularity": granularity_status(granularity)}
    known = known or {}
    for name, column in case_columns.items():
        fits, against = int((column == 1).sum()), int((column == -1).sum())
        if against:
            status = "contradicted"
        elif fits >= MIN_CASES:
            status = "detected"
        elif fits and name in known:
            status = "known"
        else:
            status = "assumed" if name in IN_THE_IDEAL else "too few"
        out[name] = {"status": status, "cases": fits, "against": against}
        if name in known:
            out[name]["known"] = known[name]
    return out


def known_rules(manifest: dict) -> dict[str, str]:
    """The rules its server's source states (`KNOWN`), when every endpoint says which server it
    is (`target.served_by[].owned_by`, from /v1/models) and they all say the same."""
    served = ((manifest.get("target") or {}).get("served_by")) or []
    owners = {s.get("owned_by") for s in served if isinstance(s, dict)}
    if len(owners) != 1 or len(served) != len(manifest.get("endpoints") or served):
        return {}
    return dict(KNOWN.get(str(owners.pop()), {}))


def granularity_status(g: dict | None) -> dict:
    """The granularity's status: its cases are the non-zero `cached_tokens` seen."""
    if g is None:
        return {"status": "assumed", "cases": 0, "against": 0}
    block, seen = g["block_size"], g["from_records"]
    if seen is not None:  # a coarser records' block is the server's (analysis.cache)
        status = "detected" if seen % block == 0 else "contradicted"
    else:
        status = {"metrics": "reported", "argument": "given"}.get(g["source"], "assumed")
    return {"status": status, "cases": g["nonzero_samples"], "against": 0}


def explains(status: dict[str, dict], rule: str) -> bool:
    """Whether a rule's tokens are named by it: detected, or assumed (reported, given) as part of
    the ideal's definition."""
    return status[rule]["status"] in ("detected", "known", "assumed", "reported", "given")
