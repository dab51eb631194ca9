"""`harness export mlflow RUN...` and `harness export schema`: results where teams already look
(docs/export.md). The live metrics are flags of the verbs that drive runs (`--metrics-port`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.app.commands.options import add_output


def register(sub) -> None:
    p = sub.add_parser(
        "export",
        help="log run folders to MLflow; write the JSON Schemas of summary.json and records",
        description="Results where teams already look: `mlflow` logs run folders as MLflow runs "
        "(again: the same MLflow run is updated), `schema` writes the published JSON Schemas. "
        "Live Prometheus metrics are `--metrics-port` on run, simulate, replay and gate.",
    )
    verbs = p.add_subparsers(dest="what", metavar="WHAT")
    verbs.required = True
    _register_mlflow(verbs)
    _register_schema(verbs)


def _register_mlflow(verbs) -> None:
    m = verbs.add_parser(
        "mlflow",
        help="log run folders as MLflow runs (parameters, metrics, tags, artifacts)",
        description="Each run folder becomes one MLflow run: parameters from its manifest, "
        "metrics from summary.json's headline (analysed first when absent), tags naming the run "
        "and any verdict on it (its gate's gate.json, or --verdict files), and summary.json, "
        "report.html and scenario.yaml as artifacts. Exporting a folder again updates its run.",
    )
    m.add_argument("runs", nargs="+", metavar="RUN", help="run folders (globs; a sweep's points)")
    m.add_argument(
        "--tracking-uri",
        required=True,
        metavar="URI",
        help="the MLflow tracking store: http(s)://host:port, or sqlite:///path/mlflow.db",
    )
    m.add_argument("--experiment", default=None, help="experiment name (default: agentic-harness)")
    m.add_argument(
        "--verdict",
        action="append",
        default=[],
        metavar="FILE",
        help="a gate.json or `harness compare --format json` output whose verdict tags the runs "
        "it judged (a gate folder's own gate.json is read without it; repeatable)",
    )
    m.set_defaults(func=_mlflow)


def _register_schema(verbs) -> None:
    s = verbs.add_parser(
        "schema",
        help="write the JSON Schemas of summary.json and of a record",
        description="Write summary.v<N>.schema.json and record.v<N>.schema.json, generated from "
        "the harness's typed definitions (the repository keeps them in schemas/).",
    )
    add_output(s, "folder (default: schemas)", default="schemas")
    s.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the folder's schemas differ from the generated ones",
    )
    s.set_defaults(func=_schema)


def _mlflow(args: argparse.Namespace) -> int:
    from harness.export.mlflow_runs import DEFAULT_EXPERIMENT

    runs = run_folders(args.runs)
    verdicts = [Path(v) for v in args.verdict]
    for line in export_to_mlflow(
        runs, args.tracking_uri, args.experiment or DEFAULT_EXPERIMENT, verdicts
    ):
        print(line)
    return 0


def export_to_mlflow(
    runs: list[Path], tracking_uri: str, experiment: str, verdicts: Sequence[Path] = ()
) -> list[str]:
    """Each run folder analysed when it has no summary.json yet, then logged."""
    from harness.analysis.summary import analyze_run
    from harness.errors import InputError
    from harness.export.mlflow_runs import export_runs
    from harness.schema import SUMMARY_FILE

    for path in verdicts:
        if not path.is_file():
            raise InputError("no such verdict file", path=path)
    for run in runs:
        if not (run / SUMMARY_FILE).is_file():
            print(f"harness: analysing {run} (no {SUMMARY_FILE} yet)", file=sys.stderr)
            analyze_run(run)
    return export_runs(runs, tracking_uri, experiment, list(verdicts))


def run_folders(patterns: list[str]) -> list[Path]:
    """The run folders named (globs expanded); a sweep folder stands for its points."""
    from harness.analysis.loader import expand_run_dirs
    from harness.errors import InputError
    from harness.schema import MANIFEST_FILE, RECORDS_FILE

    out: list[Path] = []
    for path in expand_run_dirs(patterns):
        if not path.is_dir():
            raise InputError("not a run folder", path=path)
        if (path / RECORDS_FILE).is_file() or (path / MANIFEST_FILE).is_file():
            out.append(path)
            continue
        points = sorted(p.parent for p in path.glob(f"*/{MANIFEST_FILE}"))
        if not points:
            raise InputError(f"holds no {MANIFEST_FILE} or {RECORDS_FILE}", path=path)
        out.extend(points)
    return out


def _schema(args: argparse.Namespace) -> int:
    from harness.export.json_schema import drifted, write_schemas

    folder = Path(args.output)
    if args.check:
        stale = drifted(folder)
        for name in stale:
            print(f"harness: {folder / name} differs from the types; `harness export schema`")
        return 1 if stale else 0
    for path in write_schemas(folder):
        print(f"wrote {path}")
    return 0
