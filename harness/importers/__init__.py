"""`harness import TOOL PATH -o RUN`: another benchmark tool's per-request export as a run folder.

Each importer reads one tool's export and yields our records (harness/schema.py) on a run clock
that starts at the export's first send, plus `Imported.notes`: which record fields the export
does not carry and which of its numbers mean something else than ours (docs/metrics.md, "The same
names in other tools"). The notes go into the manifest (`imported.notes`), so `analyze`, `report`
and `compare` show them beside the numbers instead of hiding the difference.
"""

from __future__ import annotations

from harness.importers.common import Imported, write_imported
from harness.importers.tools import TOOLS, read_export

__all__ = ["TOOLS", "Imported", "import_run", "read_export", "write_imported"]


def import_run(tool: str, source, out, run_id: str | None = None, **options):
    """Read `source` (a file, or the tool's output folder) and write run folder `out`.
    `options`: guidellm takes `benchmark` (which one of a sweep)."""
    return write_imported(read_export(tool, source, **options), out, run_id=run_id)
