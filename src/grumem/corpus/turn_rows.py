"""turns.parquet: verl's RL row shape (data_source, prompt as chat messages, ability,
reward_model, extra_info), one row a trainable turn, written a row group at a time
(grumem.io.parquet)."""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import IO, Any, NamedTuple

import pyarrow as pa

from grumem.corpus.log_reader import TRAJECTORY_FIELDS
from grumem.io.parquet import RowGroupWriter
from grumem.records.trajectory import Trajectory, TrajectoryTurn

# a turn's advantages (paper Eq. 12-13), as in trajectories.jsonl
ADVANTAGES = ("advantage", "advantage_traj", "advantage_turn")

# the texts: their min/max statistics would be kilobytes a row group and filter nothing
_NO_STATISTICS = {
    "prompt.list.element.content",
    "extra_info.response",
    "extra_info.chunk_sha",
    "extra_info.request_sha256",
}


PARQUET_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("trajectory_id", pa.string()),
                    ("t", pa.int64()),
                    ("chunk_sha", pa.string()),
                    ("label", pa.bool_()),
                    ("response", pa.string()),
                    ("r_update", pa.int64()),
                    ("r_exit", pa.float64()),
                    ("r_exit_reason", pa.string()),
                    ("r_format", pa.int64()),
                    ("r_outcome", pa.float64()),
                    ("t_exit", pa.int64()),
                    ("t_last_evidence", pa.int64()),
                    ("parsed", pa.bool_()),
                    ("update_gate", pa.bool_()),
                    ("exit_gate", pa.bool_()),
                    ("attempt", pa.int64()),
                    ("asks", pa.int64()),
                    ("request_sha256", pa.string()),
                    ("response_model", pa.string()),
                    ("project", pa.string()),
                    ("query_id", pa.string()),
                    ("session", pa.string()),
                    ("sample", pa.int64()),
                    ("level", pa.string()),
                    ("model", pa.string()),
                    ("aborted", pa.bool_()),
                    # what grumem.verl.reward.compute_score needs to score a new answer
                    ("exit_gates", pa.list_(pa.bool_())),
                    ("other_asks_parsed", pa.bool_()),
                    ("advantage", pa.float64()),
                    ("advantage_traj", pa.float64()),
                    ("advantage_turn", pa.float64()),
                ]
            ),
        ),
    ]
)


_PROMPT = PARQUET_SCHEMA.field("prompt").type
_MESSAGE = _PROMPT.value_type
_REWARD_MODEL = PARQUET_SCHEMA.field("reward_model").type
_EXTRA_INFO = PARQUET_SCHEMA.field("extra_info").type


class TurnRow(NamedTuple):
    """One turn's verl row, before it becomes columns: the turn, its trajectory, the
    row's place in the file, and what reward needs of the trajectory's other turns."""

    turn: TrajectoryTurn
    traj: Trajectory
    row_index: int  # verl's extra_info.index: the row's place in the file
    exit_gates: list[bool | None]
    other_asks_parsed: bool


def turn_rows(traj: Trajectory, first_index: int) -> list[TurnRow]:
    """A trajectory's verl rows, one a turn; `first_index` is its first row's place in
    the file (verl's extra_info.index)."""
    exit_gates = [turn.exit_gate for turn in traj.turns]
    # r_format of a new answer to turn t also needs every other recorded ask
    failures = sum(not a.parsed for turn in traj.turns for a in turn.earlier_asks)
    failures += sum(not turn.parsed for turn in traj.turns)
    return [
        TurnRow(turn, traj, first_index + i, exit_gates, failures - (not turn.parsed) == 0)
        for i, turn in enumerate(traj.turns)
    ]


def turn_rows_writer(
    sink: str | IO[bytes],
    data_source: str,
    ability: str,
    metadata: Mapping[bytes, bytes] | None = None,
) -> RowGroupWriter[TurnRow]:
    """turns.parquet's writer (or a split file's, `metadata` naming it): rows in, written
    as PARQUET_SCHEMA a row group at a time."""

    def table(rows: list[TurnRow]) -> pa.Table:
        return turns_table(data_source, ability, rows)

    return RowGroupWriter(sink, PARQUET_SCHEMA, table, turn_size, _NO_STATISTICS, metadata)


def turns_table(data_source: str, ability: str, rows: list[TurnRow]) -> pa.Table:
    """The rows as a table of PARQUET_SCHEMA, built column by column (a row's dict would
    cost more than the row)."""
    n = len(rows)
    turns = [r.turn for r in rows]
    trajs = [r.traj for r in rows]
    cols: dict[str, list[Any]] = {
        "style": ["rule"] * n,
        "ground_truth": ["yes" if turn.label else "no" for turn in turns],
        "split": [traj.split for traj in trajs],
        "index": [r.row_index for r in rows],
        "aborted": [traj.aborted is not None for traj in trajs],
        "exit_gates": [r.exit_gates for r in rows],
        "other_asks_parsed": [r.other_asks_parsed for r in rows],
    }
    # each record's values in one C call (attrgetter), turned into columns by zip
    for names, values in (
        (_PER_TURN, map(_turn_values, turns)),
        (_PER_TRAJECTORY, map(_traj_values, trajs)),
    ):
        for name, column in zip(names, zip(*values, strict=True), strict=True):
            cols[name] = list(column)
    offsets, roles, contents = [0], [], []  # the prompt list's offsets into its messages
    for turn in turns:
        for m in turn.prompt:
            roles.append(m.role)
            contents.append(m.content)
        offsets.append(len(roles))
    prompt = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.StructArray.from_arrays(
            [pa.array(roles, pa.string()), pa.array(contents, pa.string())],
            fields=list(_MESSAGE),
        ),
        type=_PROMPT,
    )
    reward_model, extra_info = (
        pa.StructArray.from_arrays([pa.array(cols[f.name], f.type) for f in t], fields=list(t))
        for t in (_REWARD_MODEL, _EXTRA_INFO)
    )
    arrays = [
        pa.array([data_source] * n, pa.string()),
        prompt,
        pa.array([ability] * n, pa.string()),
        reward_model,
        extra_info,
    ]
    return pa.Table.from_arrays(arrays, schema=PARQUET_SCHEMA)


_PER_TURN = (
    "t",
    "chunk_sha",
    "label",
    "response",
    "r_update",
    "parsed",
    "update_gate",
    "exit_gate",
    "attempt",
    "asks",
    "request_sha256",
    "response_model",
    *ADVANTAGES,
)
_PER_TRAJECTORY = (
    "trajectory_id",
    "r_exit",
    "r_exit_reason",
    "r_format",
    "r_outcome",
    "t_exit",
    "t_last_evidence",
    *TRAJECTORY_FIELDS,
)


_turn_values = attrgetter(*_PER_TURN)
_traj_values = attrgetter(*_PER_TRAJECTORY)


def turn_size(row: TurnRow) -> int:
    """A row's text in characters: its prompt and its response."""
    turn = row.turn
    return sum(len(m.content) for m in turn.prompt) + len(turn.response or "")
