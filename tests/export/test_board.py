"""The Grafana board (dashboards/): a dashboard Grafana imports, over the served metrics only.
tests/export/test_prometheus.py runs its queries against a real Prometheus."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.export.catalog import ALL

BOARD = Path(__file__).resolve().parents[2] / "dashboards" / "harness-live.grafana.json"


def _served() -> set[str]:
    out: set[str] = set()
    for m in ALL:
        if m.kind == "counter":
            out.add(f"{m.name}_total")
        elif m.kind == "histogram":
            out |= {f"{m.name}_bucket", f"{m.name}_sum", f"{m.name}_count"}
        else:
            out.add(m.name)
    return out


def test_the_board_reads_only_served_metrics():
    used = set(re.findall(r"\b(?:harness|gen_ai)_[a-z0-9_]+", BOARD.read_text()))
    assert used and used <= _served(), used - _served()


def test_every_panel_has_a_query_on_the_chosen_prometheus():
    board = json.loads(BOARD.read_text())
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "run_id", "endpoint", "phase"} <= variables
    titles = [p["title"] for p in board["panels"]]
    assert len(set(titles)) == len(titles) >= 8
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(set(refs)) == len(refs), panel["title"]
        assert all(t["expr"] for t in panel["targets"]), panel["title"]


def test_docs_map_every_metric():
    """docs/export.md's table names each served metric and the GenAI convention it follows."""
    doc = (BOARD.parents[1] / "docs" / "export.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`"): line.split("|")[4]
        for line in doc.splitlines()
        if line.startswith("| `")
    }
    for m in ALL:
        name = f"{m.name}_total" if m.kind == "counter" else m.name
        assert name in rows, name
        if m.semconv is not None:
            assert f"`{m.semconv}`" in rows[name], name
