"""turns.parquet: verl's RL row shape (data_source, prompt as chat messages, ability,
reward_model, extra_info) and a sink that writes it one row group at a time."""

from __future__ import annotations

from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from grumem.corpus.log_reader import TRAJECTORY_FIELDS
from grumem.records.trajectory import Trajectory, TrajectoryTurn

# a turn's advantages (paper Eq. 12-13), as in trajectories.jsonl
ADVANTAGES = ("advantage", "advantage_traj", "advantage_turn")

# A row group is flushed at whichever comes first; prompts are up to ~30k
# tokens each, so a row count alone would not bound memory. The parquet
# footer keeps metadata per row group until the file closes, so row groups
# are not made smaller than this (memory would grow with the turn count).
ROW_GROUP_ROWS = 4096
ROW_GROUP_BYTES = 32 << 20
# Min/max statistics of prompts and responses are kilobytes per row group in
# the footer and useless for filtering; keep them for the small columns only.
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
_TOP = ("data_source", "ability")
_COLUMNS = (*_TOP, *(f.name for f in (*_REWARD_MODEL, *_EXTRA_INFO)))


def statistics_columns(schema: pa.Schema, without: set[str]) -> list[str]:
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


class ParquetSink:
    """verl rows, kept as columns and written one row group at a time. (Writing each
    row group in a thread while the next is read cost 10 MiB more peak memory at 1M
    turns than at 100k, the allocator's, for no CPU saved: not done.)"""

    def __init__(self, sink: str | IO[bytes]):
        # no created_by override needed: pyarrow writes its version, not a time,
        # so equal rows give equal bytes (tests check)
        self._writer = pq.ParquetWriter(
            sink,
            PARQUET_SCHEMA,
            compression="zstd",
            write_statistics=statistics_columns(PARQUET_SCHEMA, _NO_STATISTICS),
        )
        self._clear()

    def _clear(self) -> None:
        self._cols: dict[str, list[Any]] = {name: [] for name in _COLUMNS}
        self._offsets = [0]  # the prompt list's offsets into roles and contents
        self._roles: list[str] = []
        self._contents: list[str] = []
        self._rows = 0
        self._bytes = 0

    def add_trajectory(
        self, data_source: str, ability: str, traj: Trajectory, first_index: int
    ) -> None:
        """A trajectory's verl rows, built as columns (a row's dict would cost more than
        the row); `first_index` is its first row's place in the file."""
        turns = traj.turns
        cols = trajectory_columns(data_source, ability, traj, first_index)
        start = 0
        for i, turn in enumerate(turns):
            self._rows += 1
            self._bytes += row_size(turn)
            if self._rows >= ROW_GROUP_ROWS or self._bytes >= ROW_GROUP_BYTES:
                self._extend(cols, turns, start, i + 1)
                self.flush()
                start = i + 1
        if start < len(turns):
            self._extend(cols, turns, start, len(turns))

    def _extend(
        self, cols: dict[str, list[Any]], turns: list[TrajectoryTurn], a: int, b: int
    ) -> None:
        for name, values in cols.items():
            self._cols[name] += values[a:b]
        roles, contents, offsets = self._roles, self._contents, self._offsets
        for turn in turns[a:b]:
            for m in turn.prompt:
                roles.append(m.role)
                contents.append(m.content)
            offsets.append(len(roles))

    def flush(self) -> None:
        if self._rows:
            table = self._table()
            self._clear()
            self._writer.write_table(table)

    def _table(self) -> pa.Table:
        cols = self._cols
        prompt = pa.ListArray.from_arrays(
            pa.array(self._offsets, pa.int32()),
            pa.StructArray.from_arrays(
                [pa.array(self._roles, pa.string()), pa.array(self._contents, pa.string())],
                fields=list(_MESSAGE),
            ),
            type=_PROMPT,
        )
        reward_model, extra_info = (
            pa.StructArray.from_arrays([pa.array(cols[f.name], f.type) for f in t], fields=list(t))
            for t in (_REWARD_MODEL, _EXTRA_INFO)
        )
        arrays = [
            pa.array(cols["data_source"], pa.string()),
            prompt,
            pa.array(cols["ability"], pa.string()),
            reward_model,
            extra_info,
        ]
        return pa.Table.from_arrays(arrays, schema=PARQUET_SCHEMA)

    def close(self) -> None:
        """Close the file; rows not yet flushed are dropped (the caller flushes on success)."""
        self._writer.close()


def trajectory_columns(
    data_source: str, ability: str, traj: Trajectory, first_index: int
) -> dict[str, list[Any]]:
    """A trajectory's verl rows by leaf column of PARQUET_SCHEMA (prompt aside), one
    value per turn."""
    turns = traj.turns
    n = len(turns)
    failures = sum(not a.parsed for turn in turns for a in turn.earlier_asks)
    failures += sum(not turn.parsed for turn in turns)
    cols: dict[str, list[Any]] = {
        "data_source": [data_source] * n,
        "ability": [ability] * n,
        "style": ["rule"] * n,
        "ground_truth": ["yes" if turn.label else "no" for turn in turns],
        "split": ["train"] * n,
        "index": list(range(first_index, first_index + n)),
        "aborted": [traj.aborted is not None] * n,
        "exit_gates": [[turn.exit_gate for turn in turns]] * n,
        "other_asks_parsed": [failures - (not turn.parsed) == 0 for turn in turns],
    }
    for name in _PER_TURN:
        cols[name] = [getattr(turn, name) for turn in turns]
    for name in _PER_TRAJECTORY:
        cols[name] = [getattr(traj, name)] * n
    return cols


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


def row_size(turn: TrajectoryTurn) -> int:
    return sum(len(m.content) for m in turn.prompt) + len(turn.response or "")
