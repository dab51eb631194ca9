"""`harness capacity SCENARIO --simulate --replicas 1,2,4 --routing all`: a fleet table, simulated.

For each replica count and routing policy: the most concurrent agents the fleet serves within the
scenario's SLOs (the exact search of harness/app/capacity/virtual.py over the total concurrency), and
the fleet's prefix-cache hit rate at that load. One replica's capacity is found first; N replicas
start their search at N times it and step by a quarter (so a fleet costs a few points near its
answer, not a doubling from 1) and bisect to `resolution` of the answer. Every figure is the cost
model's on the virtual clock: modelled, not measured. fleet.json holds every point; fleet.md the
table.

The lesson it draws (docs/engine.md, "Fleets"): an agent's turn re-sends the whole context, so a
policy that sends it where its prefix is cached (session_sticky, longest_prefix) keeps the hit rate
of one replica, while one that spreads turns (round_robin, least_outstanding) loses it as the
fleet grows, and the capacity with it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from harness.analysis.capacity import Rule
from harness.app.capacity.virtual import MODELLED, Point, Search, at, measure_point, slos_of
from harness.app.scenario import Scenario
from harness.driver.routing import POLICIES

FLEET_FILE = "fleet.json"
STEP = 1.25  # from the scaled guess, up or down by a quarter until the answer is bracketed


def on_replicas(scenario: Scenario, replicas: int, policy: str) -> Scenario:
    """The scenario on `replicas` in-process replicas routed by `policy` (one GPU each)."""
    target = scenario.target
    engine = target.engine.model_copy(update={"replicas": replicas})
    target = target.model_copy(update={"engine": engine, "routing": policy})
    return scenario.model_copy(update={"target": target, "gpus": replicas})


def fleet(
    scenario: Scenario,
    out: Path,
    *,
    replicas: list[int],
    policies: list[str],
    point_s: float | None = None,
    resolution: float = 0.1,
    max_concurrency: int = 4096,
    quiet: bool = False,
    say: Callable[[str], None] | None = None,
) -> dict:
    """The table, fleet.json and fleet.md in `out`; each point a line (`say`, else stdout)."""
    from harness.app.build import build_trace

    slos, rule = slos_of(scenario), Rule()
    trace = build_trace(scenario)  # one trace for every cell and point
    log = (lambda _: None) if quiet else (say or (lambda line: print(line, flush=True)))
    began, cells, one = time.perf_counter(), [], None
    for n in sorted(set(replicas)):
        for policy in policies if n > 1 else policies[:1]:  # one replica: no routing to choose
            cell_dir = out / f"r{n}-{policy}"

            def measure(c: int, n=n, policy=policy, cell_dir=cell_dir) -> Point:
                point = at(on_replicas(scenario, n, policy), concurrency=c, point_s=point_s)
                p = measure_point(point, trace, cell_dir / f"c{c}", slos, rule)
                log(f"fleet (simulated): {n} x {policy} at {c}: {p.state}, hit {p.cache_hit_rate}")
                return p

            search = Search(measure, max_concurrency)
            guess, factor = (n * one, STEP) if one else (1, 2.0)
            answer = search.run(guess, factor, resolution if one else 0.0)
            one = one or answer or 1
            cells.append(_cell(n, policy, answer, search))
            _write(out, _table(scenario, slos, point_s, resolution, began, cells, policies))
    return _table(scenario, slos, point_s, resolution, began, cells, policies)


def _table(scenario, slos, point_s, resolution, began: float, cells, policies) -> dict:
    return {
        "clock": "virtual",
        "modelled": True,
        "note": MODELLED,
        "slos": {s.name: s.bound for s in slos},
        "point_s": point_s or scenario.load.max_duration,
        "resolution": resolution,
        "wall_s": round(time.perf_counter() - began, 1),
        "cells": _with_one_replica(cells, policies),
    }


def _write(out: Path, result: dict) -> None:
    """After every cell: a long table that stops part way keeps the cells it has."""
    (out / FLEET_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "fleet.md").write_text(fleet_markdown(result), encoding="utf-8")


def _cell(n: int, policy: str, answer: int | None, search: Search) -> dict:
    at_answer = search.points.get(answer) if answer is not None else None
    return {
        "replicas": n,
        "routing": policy,
        "agents_at_slo": answer,
        "cache_hit_rate": at_answer.cache_hit_rate if at_answer else None,
        "figures": at_answer.figures if at_answer else {},
        "points": [
            {"concurrency": c, "state": p.state, "cache_hit_rate": p.cache_hit_rate}
            for c, p in sorted(search.points.items())
        ],
    }


def _with_one_replica(cells: list[dict], policies: list[str]) -> list[dict]:
    """One replica's cell stands for every policy (with one endpoint none routes anything)."""
    out = []
    for cell in cells:
        if cell["replicas"] == 1:
            out += [{**cell, "routing": p} for p in policies]
        else:
            out.append(cell)
    return out


def fleet_markdown(result: dict) -> str:
    cells = result["cells"]
    policies = list(dict.fromkeys(c["routing"] for c in cells))
    counts = sorted({c["replicas"] for c in cells})
    by = {(c["replicas"], c["routing"]): c for c in cells}
    head = " | ".join(f"{p}: agents / hit" for p in policies)
    lines = [
        "# Fleet on the virtual clock: agents at SLO and prefix-cache hit rate per routing policy",
        "",
        f"**Modelled, not measured**: {MODELLED}.",
        "",
        f"Each point one run of {result['point_s']:g} simulated seconds; agents at SLO: the most "
        f"concurrent agents meeting every SLO ({_slos(result)}), to {result['resolution']:.0%} of "
        "the answer above one replica.",
        "",
        f"| replicas | {head} |",
        "|---:|" + "---:|" * len(policies),
    ]
    for n in counts:
        row = [_entry(by.get((n, p))) for p in policies]
        lines.append(f"| {n} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _entry(cell: dict | None) -> str:
    if cell is None or cell["agents_at_slo"] is None:
        return "n/a"
    hit = cell["cache_hit_rate"]
    return f"{cell['agents_at_slo']} / {'n/a' if hit is None else f'{hit:.1%}'}"


def _slos(result: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in result["slos"].items())


def parse_policies(text: str) -> list[str]:
    names = list(POLICIES) if text == "all" else [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise ValueError(f"routing must be 'all' or some of {', '.join(POLICIES)}")
    return names
