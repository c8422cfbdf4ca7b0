"""turns.parquet (grumem.corpus.turn_rows): verl's columns, one row a turn in the
trajectories' order, in row groups cut at the row that reaches a limit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grumem.io.typed import read_records
from grumem.records.trajectory import Trajectory
from grumem.stages.export import TRAJECTORIES, TURNS, export
from support.export import inputs, trajectories, verl_rows


def test_parquet_has_verl_columns(work: Path) -> None:
    export(inputs(work, data_source="demo"))
    table = pq.read_table(work / "corpus" / TURNS)
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    schema = table.schema
    assert schema.field("data_source").type == pa.string()
    assert schema.field("ability").type == pa.string()
    assert schema.field("prompt").type == pa.list_(
        pa.struct([("role", pa.string()), ("content", pa.string())])
    )
    assert schema.field("reward_model").type == pa.struct(
        [("style", pa.string()), ("ground_truth", pa.string())]
    )
    extra = {f.name for f in schema.field("extra_info").type}
    assert {
        "index",
        "split",
        "trajectory_id",
        "t",
        "response",
        "r_update",
        "r_exit",
        "r_format",
        "r_outcome",
        "chunk_sha",
        "parsed",
        "update_gate",
        "exit_gate",
    } <= extra
    rows = table.to_pylist()
    turns = [(tr, t) for tr in trajectories(work / "corpus") for t in tr["turns"]]
    assert len(rows) == len(turns) == 24
    for i, (row, (traj, turn)) in enumerate(zip(rows, turns, strict=True)):
        e = row["extra_info"]
        assert row["data_source"] == "demo" and row["ability"] == "memory_gating"
        assert row["reward_model"] == {
            "style": "rule",
            "ground_truth": "yes" if turn["label"] else "no",
        }
        assert row["prompt"] == turn["prompt"]
        assert (e["index"], e["trajectory_id"], e["t"]) == (i, traj["trajectory_id"], turn["t"])
        assert (e["response"], e["r_update"], e["parsed"]) == (
            turn["response"],
            turn["r_update"],
            turn["parsed"],
        )
        assert (e["r_exit"], e["r_format"], e["r_outcome"]) == (
            traj["r_exit"],
            traj["r_format"],
            None,
        )


@pytest.mark.parametrize("limit", ["ROW_GROUP_ROWS", "ROW_GROUP_BYTES"])
def test_row_groups_hold_the_rows_in_order(work: Path, monkeypatch, limit: str) -> None:
    """The columnar sink cuts a row group at the row that reaches ROW_GROUP_ROWS or
    ROW_GROUP_BYTES (mid-trajectory too), and the file holds exactly the rows
    verl_rows gives, in order."""
    from grumem.corpus import turn_rows
    from grumem.io import parquet

    monkeypatch.setattr(parquet, limit, 5 if limit == "ROW_GROUP_ROWS" else 12_000)
    export(inputs(work))
    rows, sizes = [], []
    for _, record in read_records(work / "corpus" / TRAJECTORIES, Trajectory):
        for row, size in verl_rows("grumem", "memory_gating", record, len(rows)):
            rows.append(row)
            sizes.append(size)
    expected_groups, n, b = [], 0, 0
    for size in sizes:
        n, b = n + 1, b + size
        if n >= parquet.ROW_GROUP_ROWS or b >= parquet.ROW_GROUP_BYTES:
            expected_groups.append(n)
            n, b = 0, 0
    expected_groups += [n] if n else []
    f = pq.ParquetFile(work / "corpus" / TURNS)
    groups = [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)]
    assert groups == expected_groups and len(groups) > 2
    assert f.read().to_pylist() == rows
    assert f.read().equals(pa.Table.from_pylist(rows, schema=turn_rows.PARQUET_SCHEMA))
