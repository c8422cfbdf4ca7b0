"""The corpus's parquet writer (grumem.io.parquet): a row group ends at the row that
reaches the row or text limit, the rows come back as written and in order, and the
statistics leave out the columns named."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grumem.io import parquet
from grumem.io.parquet import RowGroupWriter, statistics_columns

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("text", pa.string()),
        ("parts", pa.list_(pa.struct([("name", pa.string()), ("n", pa.int64())]))),
    ]
)


def _table(rows: list[tuple[int, str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "text": text, "parts": [{"name": text[:1], "n": i}]} for i, text in rows],
        schema=SCHEMA,
    )


def _write(rows: list[tuple[int, str]]) -> tuple[pq.ParquetFile, int]:
    buffer = io.BytesIO()
    writer = RowGroupWriter(buffer, SCHEMA, _table, lambda row: len(row[1]), {"text"})
    for row in rows:
        writer.add(row)
    writer.flush()
    writer.close()
    return pq.ParquetFile(io.BytesIO(buffer.getvalue())), writer.written


@pytest.mark.parametrize(
    "limit, value, sizes, groups",
    [
        # the 3rd row reaches 3 rows: it ends the group, the next starts one
        ("ROW_GROUP_ROWS", 3, [1] * 7, [3, 3, 1]),
        # 4 + 4 + 4 characters reach 10 at the 3rd row; 9 + 1 reach it at the 2nd
        ("ROW_GROUP_BYTES", 10, [4, 4, 4, 9, 1, 2], [3, 2, 1]),
    ],
)
def test_a_group_ends_at_the_row_that_reaches_a_limit(
    monkeypatch: pytest.MonkeyPatch, limit: str, value: int, sizes: list[int], groups: list[int]
) -> None:
    monkeypatch.setattr(parquet, limit, value)
    rows = [(i, "x" * n) for i, n in enumerate(sizes)]
    f, written = _write(rows)
    assert [f.metadata.row_group(g).num_rows for g in range(f.num_row_groups)] == groups
    assert written == len(rows)
    assert f.read().equals(_table(rows))


def test_no_rows_no_group() -> None:
    f, written = _write([])
    assert (f.num_row_groups, written, f.schema_arrow) == (0, 0, SCHEMA)


def test_statistics_are_kept_but_for_the_columns_named() -> None:
    leaves = ["id", "text", "parts.list.element.name", "parts.list.element.n"]
    assert statistics_columns(SCHEMA, ()) == leaves
    assert statistics_columns(SCHEMA, {"text", "parts.list.element.name"}) == [
        "id",
        "parts.list.element.n",
    ]
    f, _ = _write([(1, "a"), (2, "b")])
    columns = f.metadata.row_group(0)
    stats = {columns.column(i).path_in_schema: columns.column(i).statistics for i in range(4)}
    assert stats["text"] is None
    assert (stats["id"].min, stats["id"].max) == (1, 2)
