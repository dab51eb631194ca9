"""Files written whole or not at all: a temporary beside the file, renamed over it at the end.

On any failure (a full disk, a read-only folder, Ctrl-C) the temporary is removed and the old
file, if any, stays as it was: a failed write leaves nothing behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """The temporary to write `path` through; renamed over `path` when the block ends well."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """`data` (text as UTF-8) into `path`, whole or not at all."""
    with replacing(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
    return Path(path)
