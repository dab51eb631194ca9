"""`harness <verb>`: parses flags and calls one plain function per verb.

Verbs register one way: every verb module is named in `COMMAND_MODULES` (the order of
`harness --help`) and has `register(subparsers)`, which adds its verbs, their flags and handlers,
importing heavy modules (torch, pandas, matplotlib) inside the handlers so `harness --help` stays
fast. Nothing else adds a verb (tests/test_verbs.py). A handler returns an exit code. Errors
the user can cause are `HarnessError`s: printed as one line on stderr, exit 2, no traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
import warnings

from harness import __version__
from harness.app.extras import missing_extra
from harness.app.parser import Parser
from harness.errors import HarnessError, HarnessWarning

COMMAND_MODULES = (
    "harness.app.commands.trace",
    "harness.app.commands.serve",
    "harness.app.commands.results",
    "harness.app.commands.run",
    "harness.app.commands.capacity",
    "harness.app.commands.gate",
    "harness.app.commands.probe",
    "harness.app.commands.whatif",
    "harness.app.commands.export",
    "harness.app.commands.record",
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="harness",
        description="Benchmark LLM servers under agentic (coding-agent) traffic.",
    )
    parser.add_argument("--version", action="version", version=f"agentic-harness {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _format_warning(
    message, category, filename, lineno, line=None, _default=warnings.formatwarning
):
    if issubclass(category, HarnessWarning):
        return f"harness: warning: {message}\n"
    return _default(message, category, filename, lineno, line)


def main(argv: list[str] | None = None) -> int:
    warnings.formatwarning = _format_warning
    # A run folder loaded three times (analyze, report, capacity) says each of its warnings once.
    warnings.filterwarnings("once", category=HarnessWarning)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        line = missing_extra(exc)
        if line is None:
            raise
        print(f"harness: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (harness.driver.live.signals names which)
        print(f"harness: interrupted{f': {exc}' if str(exc) else ''}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if exc.errno not in _WRITE_ERRORS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"harness: error: {where}cannot write ({exc.strerror})", file=sys.stderr)
        return 2


# A folder or disk that refuses a write: one line, whichever file it was (docs/driver.md).
_WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


if __name__ == "__main__":
    sys.exit(main())
