"""What the verbs share, defined once: their common options (`--set`, `-o`, `--format`,
`--fail-on`, `--quiet`, `--verbose`, the export flags) and how they print by `--format`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

FORMATS = ("table", "json", "markdown")


def add_sets(
    p: argparse._ActionsContainer, help: str, *, flag: str = "--set", dest: str = "sets"
) -> None:
    """A repeatable `KEY=VALUE` option (`--set` unless `flag` names another), into `dest`."""
    p.add_argument(flag, dest=dest, action="append", default=[], metavar="KEY=VALUE", help=help)


def add_output(p: argparse.ArgumentParser, help: str, **kwargs: Any) -> None:
    """`-o/--output`; `kwargs` as argparse takes them (required, default, type, metavar)."""
    p.add_argument("-o", "--output", help=help, **kwargs)


def add_format(
    p: argparse.ArgumentParser, json_help: str = "print one JSON object", choices=FORMATS
) -> None:
    """`--format` (default table), with `--json` kept as its alias."""
    markdown = "; markdown: the table in a fenced block (a CI job summary, a pull request)"
    p.add_argument(
        "--format",
        choices=choices,
        default="table",
        help=f"table: for a terminal; json: {json_help}"
        + (markdown if "markdown" in choices else ""),
    )
    p.add_argument(
        "--json", dest="format", action="store_const", const="json", help="= --format json"
    )


def add_fail_on(p: argparse.ArgumentParser, help: str, default: str | None = None) -> None:
    """`--fail-on SPEC`: the regressions that make the verb exit 1."""
    p.add_argument("--fail-on", default=default, metavar="SPEC", help=help)


def add_quiet(p: argparse.ArgumentParser, help: str) -> None:
    """`--quiet`: less on the terminal (what is left out, `help` says)."""
    p.add_argument("--quiet", action="store_true", help=help)


def add_verbose(p: argparse.ArgumentParser) -> None:
    """`--verbose`: the terminal summary with every figure, not the short one."""
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print every figure of the summary (default: about 15 lines; summary.json and the"
        " report have them all)",
    )


def add_export_flags(p: argparse.ArgumentParser, *, mlflow: bool = True) -> None:
    """`--metrics-port`, `--metrics-host` and (`mlflow`) `--mlflow-tracking-uri`,
    `--mlflow-experiment`: the flags of every verb that drives runs (harness/app/exporting.py
    acts on them)."""
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve live Prometheus metrics of the run(s) on this port while they go (0: any "
        "free port, printed); needs the [metrics] extra; docs/export.md",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address the metrics endpoint listens on (default: loopback only)",
    )
    if mlflow:
        p.add_argument(
            "--mlflow-tracking-uri",
            default=None,
            metavar="URI",
            help="log each run folder to this MLflow tracking store at the end "
            "(as `harness export mlflow`); needs the [mlflow] extra",
        )
        p.add_argument(
            "--mlflow-experiment",
            default=None,
            metavar="NAME",
            help="the MLflow experiment (default: agentic-harness)",
        )


def printer(to_stderr: bool):
    """A verb's progress lines: stdout, or stderr where stdout holds one JSON object."""

    def say(line: str) -> None:
        print(line, file=sys.stderr if to_stderr else sys.stdout, flush=True)

    return say


def formatted(fmt: str, table: str, data: object) -> str:
    """The result as --format asked: the table, its JSON, or the table fenced for Markdown."""
    if fmt == "json":
        return json.dumps(data, indent=2)
    return f"```text\n{table.rstrip()}\n```" if fmt == "markdown" else table
