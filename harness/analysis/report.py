"""`report.html`: one self-contained page (inline CSS, figures as base64 PNG, no network).

Several runs sit side by side: one column per run in every table, one line per run in every
figure, and a significance-tested comparison of each run against the first. A small inline
script marks the page once every figure has decoded (`data-figures="loaded/total"`), which is
what the browser test waits for.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib.pyplot as plt

from harness.analysis.records import load_runs
from harness.analysis.report_tables import cache_tables, compare_section, summary_rows, task_tables
from harness.analysis.summary import Analysis, analyze
from harness.schema import REPORT_FILE

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.6rem} h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.25rem .6rem;text-align:right} th:first-child,td:first-child{text-align:left}
thead th{background:#f3f3f3} .note{color:#555;font-size:.85rem}
.sim{background:#fff3cd;border:1px solid #e0c060;padding:.6rem 1rem;border-radius:4px}
.warn{background:#fde8e8;border:1px solid #d99;padding:.4rem 1rem;border-radius:4px}
figure{margin:1rem 0} img{max-width:100%;height:auto;border:1px solid #eee}
"""

SCRIPT = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.documentElement.dataset.figures = ok + "/" + imgs.length;
});
"""


def write_report(run_dirs, out_path: str | Path | None = None) -> Path:
    runs = load_runs([run_dirs] if isinstance(run_dirs, str | Path) else run_dirs)
    analyses = [analyze(r) for r in runs]
    out = Path(out_path) if out_path else runs[0].path / REPORT_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render_report(analyses), encoding="utf-8")
    tmp.replace(out)
    return out


def render_report(analyses: list[Analysis]) -> str:
    from harness.analysis.plots import all_figures

    names = [a.run.name for a in analyses]
    body = [f"<h1>agentic-harness report: {html.escape(', '.join(names))}</h1>"]
    body += _banners(analyses)
    body += ["<h2>Summary</h2>", summary_rows(analyses)]
    if len(analyses) > 1:
        body += ["<h2>Change against the first run</h2>", compare_section(analyses)]
    body += ["<h2>Prefix cache</h2>", cache_tables(analyses)]
    body += ["<h2>Tasks (main session + subagents)</h2>", task_tables(analyses)]
    body.append("<h2>Figures</h2>")
    for title, fig in all_figures(analyses).items():
        body.append(_figure_html(title, fig))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape('report: ' + ', '.join(names))}</title>"
        f"<style>{CSS}</style><script>{SCRIPT}</script></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _banners(analyses: list[Analysis]) -> list[str]:
    out = []
    simulated = [a.run.name for a in analyses if a.run.simulated]
    if simulated:
        out.append(
            f'<p class="sim"><b>Simulated engine:</b> the timings of {html.escape(", ".join(simulated))} come '
            "from the reference engine's simulated runner (a cost model, manifest <code>simulated: true</code>), "
            "not from a real server. Compare them with real runs only as a model.</p>"
        )
    for a in analyses:
        for w in a.summary.get("warnings", []):
            out.append(f'<p class="warn">{html.escape(a.run.name)}: {html.escape(w)}</p>')
    return out


def _figure_html(title: str, fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    t = html.escape(title)
    return f'<figure><img alt="{t}" src="data:image/png;base64,{data}"><figcaption>{t}</figcaption></figure>'
