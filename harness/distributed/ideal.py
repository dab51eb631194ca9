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
from harness.trace.prefix import IdealPrefixCache


def recompute_ideal(trace: Trace, config: ReplayConfig, run_dir: Path) -> int:
    """Rewrite `cached_tokens_ideal` in `run_dir`'s records; returns how many changed."""
    path = Path(run_dir) / RECORDS_FILE
    records = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
    content = Content(trace, salt=config.salt)
    cache = IdealPrefixCache(config.block_size)
    order = sorted(range(len(records)), key=lambda i: (records[i]["t_sent"], i))
    changed = 0
    for i in order:
        rec = records[i]
        ideal = cache.observe(content.segments(rec["session_id"], rec["turn"]))
        changed += rec["cached_tokens_ideal"] != ideal
        rec["cached_tokens_ideal"] = ideal
    if changed:
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as fh:
            for rec in records:
                fh.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
        tmp.replace(path)
    return changed
