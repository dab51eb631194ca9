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
from harness.trace.prefix import SessionWalks


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
    """One ideal cache fed in global send order, each session resuming where its last prompt
    ended (`SessionWalks`, as trace stats and the single-process driver count)."""

    def __init__(self, trace: Trace, config: ReplayConfig) -> None:
        self.content = Content(trace, salt=config.salt)
        self.walks = SessionWalks(config.block_size)

    def observe(self, sid: str, k: int) -> int:
        appended = self.content.appends_to_previous(sid, k) and self.walks.resumes(sid, k)
        segs = self.content.new_segments(sid, k) if appended else self.content.segments(sid, k)
        return self.walks.observe(sid, k, segs, appended=appended)[0]
