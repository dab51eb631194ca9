"""A hosted API's cache rules in the ideal: misses the rules explain, and what caching cost.

The rules come from the manifest (`target.cache_rules`, harness/driver/http/cache_rules.py):

- ineligible: a hosted cache writes no prefix shorter than the minimum (Anthropic's per model,
  OpenAI's 1,024 tokens), so a request whose ideal hit is below it cannot hit: its missed ideal
  tokens are ineligible, whatever else the walk saw;
- step: OpenAI serves hits in 128-token steps: the ideal hit's tail past the last step is the
  server's granularity;
- expired: a prefix lives `ttl_s` after its last use (each use refreshes it; null where the
  API publishes no lifetime: then nothing expires). The prompts of the run are walked in send
  order over the trace's segments, each prompt at or above the minimum touching its path at
  its send time. A request's prefix is *written* as far as such prompts had
  it, and *alive* as far as they touched it within the TTL. Of the missed tokens the walk named
  evicted (or left unexplained), those past the written prefix are ineligible (only shorter
  prompts had them), those past the alive one expired: the cache did what it promises, the
  agent was idle too long.

The usage line counts Anthropic's writes (`cache_creation_*`) and reads (`cache_read_input_tokens`,
OpenAI's `cached_tokens`) as sent, and with `target.prices` what they cost beside what the same
prompts would have cost uncached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from harness.analysis.cache import miss_classes
from harness.trace.content import Content
from harness.trace.cycles import cycle_salt, split_cycled_id
from harness.trace.model import Trace

if TYPE_CHECKING:
    from harness.analysis.loader import Run

# the categories a rule takes tokens from, most specific last (taken from first)
_LOST = ("evicted", "unexplained", "no_hits", "last_block")
_ANY = (*_LOST, "in_flight", "misrouted", "granularity", "prompt_cap")


def apply(run: Run, ok: pd.DataFrame, misses: pd.DataFrame) -> tuple[pd.DataFrame, dict | None]:
    """The run's misses named by its hosted rules (if any), and the rules."""
    rules = rules_of(run.manifest)
    if rules is None:
        return misses, None
    held = None
    if run.trace is not None:
        held = held_entries(run.trace, ok, rules, run.replay.salt)
    named = name_misses(misses, rules, held)
    named["miss_class"] = miss_classes(named)
    return named, rules


def rules_of(manifest: dict) -> dict | None:
    """The run's hosted cache rules (the manifest's `target.cache_rules`), or None."""
    target = manifest.get("target")
    return (target or {}).get("cache_rules") if isinstance(target, dict) else None


def name_misses(
    misses: pd.DataFrame, rules: dict | None, held: Entries | None = None
) -> pd.DataFrame:
    """`misses` (analysis.cache.attribute_misses) with the rules' tokens moved into
    `miss_ineligible`, `miss_granularity` (the step) and `miss_expired`; `held`: per request
    what the hosted cache held for it (None: not known, nothing expires)."""
    out = misses.copy()
    for c in ("miss_ineligible", "miss_expired"):
        out[c] = 0.0
    if rules is None:
        return out
    reported = out["reported"].to_numpy()
    hit = np.nan_to_num(out["cached"].to_numpy(dtype=float))
    ideal = np.nan_to_num(out["ideal"].to_numpy(dtype=float))
    below = np.maximum(ideal - np.minimum(hit, ideal), 0.0)
    short = reported & (ideal < rules["min_tokens"])
    _move(out, np.where(short, below, 0.0), _ANY, "ineligible")
    step = int(rules.get("step_tokens") or 1)
    if step > 1:
        stepped = ideal // step * step
        _move(out, np.where(reported & ~short, ideal - np.maximum(stepped, hit), 0.0), _LOST,
              "granularity")  # fmt: skip
    else:
        stepped = ideal
    if held is not None:
        written = np.minimum(held.written, ideal)  # past it: only shorter prompts had it
        never = np.maximum(ideal - np.maximum(hit, written), 0.0)
        _move(out, np.where(reported & ~short, never, 0.0), _LOST, "ineligible")
        alive = np.minimum(held.alive, written)
        past = np.maximum(written - np.maximum(hit, alive), 0.0)
        _move(out, np.where(reported & ~short, past, 0.0), _LOST, "expired")
        stepped = np.minimum(stepped, alive // step * step)
    out["ideal_hosted"] = np.where(short, 0.0, stepped)
    return out


def hosted_summary(ok: pd.DataFrame, misses: pd.DataFrame, rules: dict | None) -> dict | None:
    """summary.json `cache.hosted`: the rules, the ideal under them, the tokens they explain,
    and what caching cost and saved (None when no rules were set and nothing was written)."""
    use = usage(ok)
    if rules is None and not use["cache_write_tokens"]:
        return None
    rep = misses[misses["reported"]]
    prompt = float(rep["prompt"].sum())
    under = float(rep["ideal_hosted"].sum()) if "ideal_hosted" in rep else None
    return {
        "rules": rules,
        "ideal_hit_rate_under_rules": under / prompt if prompt and under is not None else None,
        "ineligible_tokens": float(misses["miss_ineligible"].sum()),
        "expired_tokens": float(misses["miss_expired"].sum()),
        "requests_below_minimum": _below(rep, rules),
        "usage": use,
        "cost": cost(use, (rules or {}).get("prices"), (rules or {}).get("ttl")),
    }


def _below(rep: pd.DataFrame, rules: dict | None) -> int:
    """Requests with an ideal hit to lose that is under the minimum (a cold one loses nothing)."""
    ideal = rep["ideal"].to_numpy(dtype=float)
    return int(((ideal > 0) & (ideal < rules["min_tokens"])).sum()) if rules else 0


def usage(ok: pd.DataFrame) -> dict:
    """The prompt tokens by how the server billed them, as its usage said (reads are
    `cached_tokens`; writes Anthropic's `cache_creation_input_tokens`, by TTL where split)."""

    def total(column: str) -> float | None:
        values = ok[column].to_numpy(dtype=float) if column in ok else np.array([np.nan])
        return float(np.nansum(values)) if np.isfinite(values).any() else None

    prompt, read = total("prompt_tokens") or 0.0, total("cached_tokens") or 0.0
    written = total("cache_creation_tokens") or 0.0
    return {
        "prompt_tokens": prompt,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "cache_write_5m_tokens": total("cache_creation_5m_tokens"),
        "cache_write_1h_tokens": total("cache_creation_1h_tokens"),
        "uncached_tokens": prompt - read - written,
        "output_tokens": total("completion_tokens") or 0.0,
    }


# Anthropic's published price multipliers of the base input price (docs/driver.md)
_ANTHROPIC_TIMES = {"cache_read": 0.1, "cache_write_5m": 1.25, "cache_write_1h": 2.0}


def cost(use: dict, prices: dict | None, ttl: str | None) -> dict | None:
    """What the prompts cost with the cache and would have without it: in money with `prices`
    (per million tokens), else in input-token equivalents at Anthropic's multipliers where its
    writes were reported (None otherwise: OpenAI's read discount depends on the model)."""
    if prices is None:
        if not use["cache_write_tokens"]:
            return None
        prices, unit = {"input": 1.0, "output": 0.0, **_ANTHROPIC_TIMES}, "input tokens"
        scale = 1.0
    else:
        unit, scale = "money", 1e-6
    base = prices["input"]
    read = prices.get("cache_read")
    w5 = prices.get("cache_write_5m")
    w1 = prices.get("cache_write_1h")
    w5 = base if w5 is None else w5
    w1 = w5 if w1 is None else w1
    split_5m, split_1h = use["cache_write_5m_tokens"] or 0.0, use["cache_write_1h_tokens"] or 0.0
    unsplit = use["cache_write_tokens"] - split_5m - split_1h  # priced at the TTL asked for
    writes = split_5m * w5 + split_1h * w1 + unsplit * (w1 if ttl == "1h" else w5)
    output = use["output_tokens"] * prices.get("output", 0.0)
    cached = use["uncached_tokens"] * base + use["cache_read_tokens"] * (
        base if read is None else read
    )
    with_cache = (cached + writes + output) * scale
    without = (use["prompt_tokens"] * base + output) * scale
    return {
        "unit": unit,
        "with_cache": with_cache,
        "without_cache": without,
        "saved": without - with_cache,
        "writes_premium": (writes - use["cache_write_tokens"] * base) * scale,
    }


def _move(frame: pd.DataFrame, tokens: np.ndarray, sources: tuple[str, ...], to: str) -> None:
    """Up to `tokens` per row from `sources` (in order) into `miss_<to>`."""
    left = np.maximum(tokens, 0.0)
    for c in sources:
        col = f"miss_{c}"
        if col == f"miss_{to}" or col not in frame:
            continue
        taken = np.minimum(frame[col].to_numpy(dtype=float), left)
        frame[col] = frame[col].to_numpy(dtype=float) - taken
        frame[f"miss_{to}"] = frame[f"miss_{to}"].to_numpy(dtype=float) + taken
        left = left - taken


@dataclass(frozen=True)
class Entries:
    """Per request, in the ideal's tokens: the prefix a hosted cache held for it within the TTL
    (`alive`) and the prefix it ever wrote (`written`: shared with prompts at or above the
    minimum). `inf` where the whole shared prefix is alive (or written)."""

    alive: np.ndarray
    written: np.ndarray


def held_entries(
    trace: Trace, ok: pd.DataFrame, rules: dict, salt: str | None = None
) -> Entries | None:
    """The run's ok prompts walked in send order (None without the walk's columns). A prefix
    shorter than the minimum counts as 0: no entry is that short, so what of it is alive or
    written came with a longer prompt that is not."""
    if "ideal_shared_tokens" not in ok:
        return None
    order = np.argsort(ok["t_sent"].to_numpy(dtype=float), kind="stable")
    prompts = ok["prompt_tokens"].to_numpy(dtype=float)
    ttl = float(rules["ttl_s"]) if rules.get("ttl_s") is not None else np.inf  # none published
    least = float(rules["min_tokens"])
    walk = _TouchWalk(trace, salt)
    counts = np.zeros((3, len(ok)))  # alive, written, shared: trace tokens
    sids, turns = ok["session_id"].tolist(), ok["turn"].astype(int).tolist()
    t_sent = ok["t_sent"].to_numpy(dtype=float)
    for i in order.tolist():
        eligible = not prompts[i] < least  # a prompt under the minimum writes nothing
        counts[:, i] = walk.send(sids[i], turns[i], t_sent[i], ttl, eligible)
    alive_t, written_t, shared_t = counts
    shared = ok["ideal_shared_tokens"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(shared_t > 0, shared / shared_t, 1.0)

    def in_ideal_tokens(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
        tokens = np.floor(part * scale + 1e-6)
        return np.where(part >= whole, np.inf, np.where(tokens < least, 0.0, tokens))

    return Entries(in_ideal_tokens(alive_t, written_t), in_ideal_tokens(written_t, shared_t))


class _TouchWalk:
    """A trie over segment keys; each node remembers when an eligible prompt last used it (a
    write or a read), or -inf when only prompts under the minimum had it."""

    def __init__(self, trace: Trace, salt: str | None) -> None:
        self.trace, self.salt = trace, salt
        self.contents: dict[int, Content] = {}
        self.nodes: dict[tuple[int, tuple], list] = {}  # (parent, key) -> [node, length, t]

    def send(self, sid: str, k: int, t: float, ttl: float, eligible: bool) -> tuple[int, int, int]:
        """(tokens of the prompt's shared prefix used within `ttl` before `t`, written at all,
        shared at all); then the prompt enters, touching its path at `t` when eligible."""
        node, alive, written, shared, matching = 0, 0, 0, 0, True
        for seg in self._segments(sid, k):
            entry = self.nodes.get((node, seg.key))
            if matching and entry is not None:
                common = min(entry[1], seg.length)
                kept = entry[2] > -np.inf
                written += common if kept and written == shared else 0
                alive += common if kept and t - entry[2] <= ttl and alive == shared else 0
                shared += common
                matching = entry[1] >= seg.length
            else:
                matching = False
            if entry is None:
                entry = self.nodes[(node, seg.key)] = [len(self.nodes) + 1, 0, -np.inf]
            entry[1] = max(entry[1], seg.length)
            if eligible:
                entry[2] = t
            node = entry[0]
        return alive, written, shared

    def _segments(self, sid: str, k: int) -> list:
        tid, cycle = split_cycled_id(sid)
        content = self.contents.get(cycle)
        if content is None:
            content = self.contents[cycle] = Content(
                self.trace, salt=cycle_salt(self.salt, cycle), cache_size=256
            )
        return content.segments(tid, k)
