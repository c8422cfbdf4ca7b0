"""Parquet files written one row group at a time: the corpus's turns.parquet
(grumem.corpus.turn_rows) and sessions.parquet (grumem.corpus.rollout_rows).

A row group is written at the row that reaches ROW_GROUP_ROWS rows or
ROW_GROUP_BYTES characters of text, whichever comes first: a prompt or a
session is up to ~30k tokens, so a row count alone would not bound memory. The
parquet footer keeps metadata per row group until the file closes, so row
groups are not made smaller than this (memory would grow with the row count).
zstd compression; pyarrow writes its version, not a time, so equal rows give
equal bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import IO, Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["ROW_GROUP_BYTES", "ROW_GROUP_ROWS", "RowGroupWriter", "statistics_columns"]

ROW_GROUP_ROWS = 4096
ROW_GROUP_BYTES = 32 << 20

R = TypeVar("R")


def statistics_columns(schema: pa.Schema, without: Collection[str]) -> list[str]:
    """The leaf columns of `schema` (parquet's dotted paths) but those `without`."""
    leaves: list[str] = []

    def walk(prefix: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{prefix}.{f.name}", f.type)
        elif pa.types.is_list(t):
            walk(f"{prefix}.list.element", t.value_type)
        else:
            leaves.append(prefix)

    for f in schema:
        walk(f.name, f.type)
    return [c for c in leaves if c not in without]


class RowGroupWriter(Generic[R]):
    """Rows of one schema held as given until their row group is full, then written as
    the table `table` makes of them; `size` is a row's text in characters. Min/max
    statistics are kept but for the columns `no_statistics` names: a text's are
    kilobytes per row group in the footer, and filter nothing. `metadata` goes into the
    file's schema (a split file names its project and split there)."""

    def __init__(
        self,
        sink: str | IO[bytes],
        schema: pa.Schema,
        table: Callable[[list[R]], pa.Table],
        size: Callable[[R], int],
        no_statistics: Collection[str] = (),
        metadata: Mapping[bytes, bytes] | None = None,
    ):
        self._writer = pq.ParquetWriter(
            sink,
            schema.with_metadata(dict(metadata)) if metadata else schema,
            compression="zstd",
            write_statistics=statistics_columns(schema, no_statistics),
        )
        self._table, self._size = table, size
        self._rows: list[R] = []
        self._bytes = 0
        self.written = 0  # rows, the held ones included

    def add(self, row: R) -> None:
        self._rows.append(row)
        self._bytes += self._size(row)
        self.written += 1
        if len(self._rows) >= ROW_GROUP_ROWS or self._bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the rows held as a row group (none: nothing)."""
        if self._rows:
            table = self._table(self._rows)
            self._rows, self._bytes = [], 0
            self._writer.write_table(table)

    def close(self) -> None:
        """Close the file; rows not yet flushed are dropped (the caller flushes on success)."""
        self._writer.close()
