"""The hybrid-cache scenario's three-way table, read from its run folder (files only).

    python benchmarks/hybrid_cache_table.py RUN_DIR    # a `harness run scenarios/hybrid-cache.yaml` folder

Per retention policy: requests, prefix-cache hit rate (client-reported cached tokens) vs the ideal
(infinite cache), TTFT p50/p90, and from the engine's stats scraped after the run the peak KV
pages held by type, the snapshots taken and the snapshot pages left in the pool.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(run_dir: Path) -> list[dict]:
    sweep = json.loads((run_dir / "sweep.json").read_text())
    out = []
    for point in sweep["points"]:
        folder = Path(point["run_dir"])
        summary = json.loads((folder / "summary.json").read_text())
        after = json.loads((folder / "manifest.json").read_text())["server_metrics"]["after"][0]
        ttft = summary["ttft_s"]
        out.append(
            {
                "policy": point["point"].split("=", 1)[1],
                "requests": summary["requests_ok"],
                "hit": summary["cache_hit_rate"],
                "ideal": summary["ideal_cache_hit_rate"],
                "ttft_p50": ttft.get("p50"),
                "ttft_p90": ttft.get("p90"),
                "full": after["kv_blocks_full_peak"],
                "sliding": after["kv_blocks_sliding_peak"],
                "snapshots": after["kv_snapshots_total"],
                "snapshot_blocks": after["kv_snapshot_blocks"],
            }
        )
    return out


def render(table: list[dict]) -> str:
    head = (
        "| policy | requests | hit rate | ideal | TTFT p50 (s) | TTFT p90 (s) | peak KV pages full / sliding "
        "| snapshots | snapshot pages |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    lines = [head]
    for r in table:
        lines.append(
            f"| {r['policy']} | {r['requests']} | {r['hit']:.3f} | {r['ideal']:.3f} | "
            f"{r['ttft_p50']:.3f} | {r['ttft_p90']:.3f} | {r['full']} / {r['sliding']} | "
            f"{r['snapshots']} | {r['snapshot_blocks']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/hybrid_cache_table.py RUN_DIR")
    print(render(rows(Path(sys.argv[1]))))
