"""The tools `harness import` reads, by the name on its command line."""

from __future__ import annotations

from pathlib import Path

from harness.errors import InputError
from harness.importers import aiperf, guidellm, vllm_bench
from harness.importers.common import Imported

TOOLS = {"aiperf": aiperf, "vllm-bench": vllm_bench, "guidellm": guidellm}  # name -> its reader


def read_export(tool: str, source, **options) -> Imported:
    if tool not in TOOLS:
        raise InputError(f"unknown tool {tool!r} (known: {', '.join(TOOLS)})")
    path = Path(source)
    if not path.exists():
        raise InputError("no such file or folder", path=path)
    return TOOLS[tool].read(path, **options)
