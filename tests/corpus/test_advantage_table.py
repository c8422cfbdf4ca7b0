"""The corpus's advantages (grumem.corpus.advantage_table): a real group's values, null
for a group of one, and a table that hands each trajectory only its own."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grumem.core.advantages import ScoredTrajectory
from grumem.errors import GrumemError
from grumem.io.typed import read_records
from grumem.records.return_weights import EQUAL_WEIGHTS
from grumem.records.trajectory import Trajectory
from grumem.stages.export import SESSIONS, TRAJECTORIES, TURNS, export
from support.export import T2, by_id, inputs, sessions_inputs, trajectories


def test_advantages_of_a_real_group(work: Path) -> None:
    """q1/s-beta, samples 0 and 1: R_0 = 3/7 + 0 (on time) + 0 (a turn unparsed),
    R_1 = 5/7 - 0.75 (early) + 1; two values normalise to -1 and +1."""
    export(inputs(work, alpha=0.5))
    found = by_id(work / "corpus")
    s0, s1 = found[T2], found["demo/q1/s-beta/1"]
    assert [t["advantage_traj"] for t in s0["turns"]] == [pytest.approx(-1, rel=1e-5)] * 7
    assert [t["advantage_traj"] for t in s1["turns"]] == [pytest.approx(1, rel=1e-5)] * 7
    # r_update: s0 +1 +1 -1 -1 +1 +1 +1, s1 +1 +1 +1 +1 -1 +1 +1
    turn = [None, None, -1, -1, 1, None, None]
    for tr, sign in ((s0, 1), (s1, -1)):
        got = [t["advantage_turn"] for t in tr["turns"]]
        assert got == [None if v is None else pytest.approx(sign * v, rel=1e-5) for v in turn]
        for t in tr["turns"]:
            want = None if t["advantage_turn"] is None else (
                0.5 * t["advantage_traj"] + 0.5 * t["advantage_turn"])  # fmt: skip
            assert t["advantage"] == want
    # a group of one: null, never 0
    assert {t["advantage"] for t in found["demo/q1/s-alpha/0"]["turns"]} == {None}
    rows = pq.read_table(work / "corpus" / TURNS).to_pylist()
    turns = [t for tr in trajectories(work / "corpus") for t in tr["turns"]]
    for row, t in zip(rows, turns, strict=True):
        for name in ("advantage", "advantage_traj", "advantage_turn"):
            assert row["extra_info"][name] == t[name]


def test_trajectory_turn_weighting_reaches_the_corpus_and_the_rows(work: Path) -> None:
    """export.turn_weighting: trajectory. q1/s-beta's two samples read 7 turns each, so
    each weighs alike and the 14 turns pool: 11 x +1, 3 x -1, mean 4/7, std sqrt(33)/7;
    +1 -> 3/sqrt(33), -1 -> -11/sqrt(33) at every t (under `row` the t's where both
    samples agree are null). The sessions rows carry the setting to the group step."""
    export(sessions_inputs(work, alpha=0.5, turn_weighting="trajectory"))
    found = by_id(work / "corpus")
    up, down = 3 / math.sqrt(33), -11 / math.sqrt(33)
    for tid in (T2, "demo/q1/s-beta/1"):
        for t in found[tid]["turns"]:
            want = up if t["r_update"] == 1 else down
            assert t["advantage_turn"] == pytest.approx(want, rel=1e-5)
            assert t["advantage"] == pytest.approx(0.5 * t["advantage_traj"] + 0.5 * want, rel=1e-5)
    # a group of one stays null under either rule
    assert {t["advantage"] for t in found["demo/q1/s-alpha/0"]["turns"]} == {None}
    rows = pq.read_table(work / "corpus" / SESSIONS).to_pylist()
    assert {r["extra_info"]["turn_weighting"] for r in rows} == {"trajectory"}


def test_advantage_table_fills_in_scoring_order_only(work: Path) -> None:
    """The table is keyed by a trajectory's place among the exported ones (no id kept
    per trajectory): a record met out of that order is an error, never another's
    advantages."""
    from grumem.core.advantages import ALPHA
    from grumem.corpus.advantage_table import AdvantageTable, Scores

    export(inputs(work))
    records = [r for _, r in read_records(work / "corpus" / TRAJECTORIES, Trajectory)]
    scores = Scores()
    for r in records:
        scores.add(r.trajectory_id, _scored(r))
    table = AdvantageTable(scores, ALPHA, EQUAL_WEIGHTS)
    first = records[0]
    got = table.next(first.trajectory_id, [(t.t, t.r_update) for t in first.turns])
    assert got == _advantages(first)  # the same advantages again
    with pytest.raises(GrumemError, match="not the one the export's first pass scored"):
        table.next(records[2].trajectory_id, [(t.t, t.r_update) for t in records[2].turns])


def _scored(record: Trajectory) -> ScoredTrajectory:
    """What the scoring pass keeps of a trajectory, from its exported record."""
    pairs = tuple((t.t, t.r_update) for t in record.turns)
    group = (record.project, record.query_id, record.session)
    return ScoredTrajectory(group, pairs, record.r_exit, record.r_format)


def _advantages(record: Trajectory) -> list[tuple[float | None, ...]]:
    return [(t.advantage, t.advantage_traj, t.advantage_turn) for t in record.turns]
