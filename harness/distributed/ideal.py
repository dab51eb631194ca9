"""`cached_tokens_ideal` for the whole run, not per worker.

Each worker's driver computes the ideal prefix cache hit from what *it* sent; the server saw
what every worker sent. After a distributed run the coordinator replays the prompts through one
ideal cache in the run's send order (`t_sent`) and rewrites the field, so the value means what it
means in a single-process run. The file is replaced atomically; line order is kept.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from harness.driver.config import ReplayConfig
from harness.schema import RECORDS_FILE
from harness.trace.content import Content
from harness.trace.model import Trace
from harness.trace.prefix import IdealPrefixCache, block_hit


def recompute_ideal(trace: Trace, config: ReplayConfig, run_dir: Path) -> int:
    """Rewrite `cached_tokens_ideal` in `run_dir`'s records; returns how many changed.

    Two streaming passes (read the keys, then rewrite the lines that change), so memory holds
    a few numbers per record, not the records."""
    path = Path(run_dir) / RECORDS_FILE
    keys, before = [], []
    with path.open("rb") as fh:
        for line in fh:
            rec = orjson.loads(line)
            t_sent = rec["t_sent"] if rec["t_sent"] is not None else float("inf")
            keys.append((t_sent, len(keys), rec["session_id"], rec["turn"]))
            before.append(rec["cached_tokens_ideal"])
    keys.sort()  # send order; ties keep file order
    ideal = _IdealWalk(trace, config)
    after = before[:]
    for _, i, sid, turn in keys:
        after[i] = ideal.observe(sid, turn)
    del keys
    changed = sum(a != b for a, b in zip(after, before, strict=True))
    if changed:
        _rewrite(path, after, before)
    return changed


def _rewrite(path: Path, after: list[int], before: list[int]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with path.open("rb") as src, tmp.open("wb") as dst:
        for i, line in enumerate(src):
            if after[i] != before[i]:
                rec = orjson.loads(line)
                rec["cached_tokens_ideal"] = after[i]
                line = orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)
            dst.write(line)
    tmp.replace(path)


class _IdealWalk:
    """One ideal cache fed in send order. A turn whose previous turn was seen walks only what it
    appends, from where that prompt ended in the trie (as trace stats does), so a 100-turn
    session costs linear, not quadratic, time."""

    def __init__(self, trace: Trace, config: ReplayConfig) -> None:
        self.trace, self.content = trace, Content(trace, salt=config.salt)
        self.cache = IdealPrefixCache(config.block_size)
        self.end: dict[str, tuple[int, int, int]] = {}  # session -> (turn, trie node, length)

    def observe(self, sid: str, k: int) -> int:
        turns = self.trace.session(sid).turns
        prev = self.end.get(sid)
        if (
            prev
            and prev[0] == k - 1
            and turns[k].hash_ids is None
            and turns[k - 1].hash_ids is None
        ):
            _, node, length = prev
            segs = self.content.new_segments(sid, k)
        else:
            node, length, segs = 0, 0, self.content.segments(sid, k)
        total = length + sum(s.length for s in segs)
        hit = block_hit(length + self.cache.shared_prefix(segs, node), total, self.cache.block_size)
        self.end[sid] = (k, self.cache.insert(segs, node), total)
        return hit
