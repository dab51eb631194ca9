"""The records' list columns (`chunk_times`, `chunk_tokens`) as flat numpy arrays.

A records frame holds them in one of two forms: Python lists per row (object dtype; records.jsonl
and frames built in code) or Arrow lists (`pd.ArrowDtype`; records.parquet, whose loader keeps the
flat values and offsets because building a million Python lists per column was nearly all of its
time, docs/measurements/parquet.md). Every reader of those columns goes through `flat` here, so
both forms give the same figures; `rows` turns either back into Python lists where a row is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class FlatLists:
    lengths: np.ndarray  # per row: its list's length (0 for an empty or missing list)
    values: np.ndarray  # every row's values, row after row (float64)

    def owner(self) -> np.ndarray:
        """Per value: the position of its row."""
        return np.repeat(np.arange(self.lengths.size), self.lengths)

    def sums(self) -> np.ndarray:
        """Per row: the sum of its list (0 for an empty or missing one)."""
        return np.bincount(self.owner(), weights=self.values, minlength=self.lengths.size)


def flat(column: pd.Series) -> FlatLists:
    if isinstance(column.dtype, pd.ArrowDtype):
        return _flat_arrow(_arrow(column))
    rows = column.to_numpy()
    lengths = np.fromiter((len(c) if c else 0 for c in rows), dtype=np.int64, count=len(rows))
    values = np.fromiter(
        chain.from_iterable(c for c in rows if c), dtype=float, count=int(lengths.sum())
    )
    return FlatLists(lengths, values)


def _arrow(column: pd.Series) -> pa.ListArray:
    import pyarrow as pa  # an Arrow column comes only from records.parquet: the [parquet] extra

    data = pa.array(column.array)  # the ArrowExtensionArray's own chunks, no copy of the values
    return data.combine_chunks() if isinstance(data, pa.ChunkedArray) else data


def _flat_arrow(data: pa.ListArray) -> FlatLists:
    import pyarrow.compute as pc

    lengths = pc.fill_null(pc.list_value_length(data), 0).to_numpy().astype(np.int64)
    values = pc.list_flatten(data).to_numpy(zero_copy_only=False).astype(float, copy=False)
    return FlatLists(lengths, values)


def rows(column: pd.Series) -> list:
    """Python lists per row (None where the list is missing), whichever form the column has."""
    if isinstance(column.dtype, pd.ArrowDtype):
        return _arrow(column).to_pylist()
    return column.tolist()


def arrow_lists(data: pa.ListArray) -> pd.Series:
    """A Parquet list column as a frame column, its values and offsets kept as they are."""
    return pd.Series(pd.arrays.ArrowExtensionArray(data))
