"""The report's what-if section: each `harness whatif` a run folder holds (`whatif/whatif.json`,
and `whatif/*/whatif.json`), as the terminal shows it: the run measured, as replayed, at its
measured sends, once exactly on the run's own clock (and where it parts from the run), then the
prediction with its interval and its pool's regime in words. Every figure is read from
whatif.json; nothing is computed here."""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup

from harness.analysis.summary_types import Analysis
from harness.report.jinja import join
from harness.report.tables import table

HEADER = ["", "hit rate", "sd over draws", "interval", "TTFT p50 (s)", "ok", "refused", "pool"]


def whatif_docs(run_dir: Path) -> list[dict]:
    """The what-ifs kept in a run folder, the default one first (unreadable files skipped)."""
    found = [run_dir / "whatif" / "whatif.json", *sorted(run_dir.glob("whatif/*/whatif.json"))]
    docs = []
    for path in found:
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return docs


def whatif_section(analyses: list[Analysis]) -> Markup | None:
    parts = [_one(a.run.name, doc) for a in analyses for doc in whatif_docs(Path(a.run.path))]
    return join(parts) if parts else None


def _one(name: str, doc: dict) -> Markup:
    new = doc["predicted"]
    rows = [
        _row("the run, measured", doc["measured"], None),
        _row("the run, as replayed", doc["predicted_self"], doc["predicted_self"]["setup"]),
        _row("  at measured sends", doc["predicted_self_at_measured_sends"], None),
    ]
    exact = doc.get("predicted_self_exact")  # older whatif.json: none
    if exact is not None:
        label = "  on the run's clock" if "clock" in exact else "  exact, no jitter"  # older
        rows.append(_row(label, exact, None))
    rows.append(_row("what-if", new, new["setup"]))
    changes = ", ".join(f"{k}={v}" for k, v in doc["changes"].items())
    note = f"{name} at {changes}. Step times: {doc['time_model']}. {doc['note'].capitalize()}."
    if exact is not None:
        clock = exact.get("clock", "the fitted model's, no jitter")  # older: no clock
        note += (
            f" Exact replay, at the measured sends, step times: {clock}. "
            f"{exact['requests_as_measured']} of {exact['requests_compared']} requests cached "
            "what the run cached"
        )
        parted = exact.get("first_parting") is not None
        note += f"; {exact['words']}." if parted else "."
        steps = exact.get("steps_words")  # older whatif.json: none
        note += f" Steps: {steps}." if steps else ""
    regime = new.get("regime")
    if not regime:
        return table(HEADER, rows, note)
    kind = "warn" if regime["thrashing"] or regime.get("crowded") else "note"
    said = Markup('<p class="{}">Regime: {}.</p>').format(kind, regime["words"])
    return said + table(HEADER, rows, note)


def _row(label: str, r: dict, setup: dict | None) -> list[str]:
    band = r.get("interval")
    sd = r.get("cache_hit_rate_sd")
    return [
        label,
        _pct(r["cache_hit_rate"]),
        "" if sd is None else f"{100 * sd:.2f} pp",
        ""
        if band is None
        else "{:.2f}-{:.2f} %".format(*(100 * x for x in band["cache_hit_rate"])),
        "-" if r["ttft_p50_s"] is None else f"{r['ttft_p50_s']:.3f}",
        str(r["requests_ok"]),
        str(r["requests_refused"]),
        "" if setup is None else f"{setup['num_gpu_blocks']} pages of {setup['block_size']}",
    ]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"
