"""The corpus's per-turn advantages (grumem.advantages, paper Eq. 12-13), computed
between the export's two passes and held until the second has written every turn.

A group (the samples of one project, query and session) need not be contiguous
in the log, so the first pass keeps a few numbers per trajectory
(ScoredTrajectory); the groups are then scored and their advantages packed, 3
doubles a turn with NaN for null, as the table holds the whole corpus's.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from typing import Any

from grumem.advantages import (
    NULL_REASONS,
    NullCounts,
    ReturnWeights,
    ScoredTrajectory,
    iter_advantages,
)
from grumem.corpus.parquet import ADVANTAGES


def scored(record: dict[str, Any]) -> ScoredTrajectory:
    """What advantages need of one corpus record."""
    return ScoredTrajectory(
        (record["project"], record["query_id"], record["session"]),
        tuple((turn["t"], turn["r_update"]) for turn in record["turns"]),
        record["r_exit"],
        record["r_format"],
    )


class AdvantageTable:
    """Every exported turn's advantages, by trajectory id, and the summary's account."""

    def __init__(
        self,
        scored: Iterable[tuple[str, ScoredTrajectory]],
        alpha: float,
        weights: ReturnWeights,
    ):
        ids, trajectories = [], []
        for tid, s in scored:
            ids.append(tid)
            trajectories.append(s)
        nulls = NullCounts()
        self._packed: dict[str, array] = {}
        for i, turns in iter_advantages(trajectories, alpha, weights, nulls=nulls):
            values = (getattr(turn, name) for turn in turns for name in ADVANTAGES)
            self._packed[ids[i]] = array("d", (math.nan if v is None else v for v in values))
        turns = sum(len(s.r_update) for s in trajectories)
        self.summary: dict[str, Any] = {
            "alpha": alpha,
            "return_weights": {
                "r_update": weights.r_update,
                "r_exit": weights.r_exit,
                "r_format": weights.r_format,
            },
            "groups": len({s.group for s in trajectories}),
            "turns_with_advantage": turns - nulls.advantage,
            "turns_without_advantage": nulls.advantage,
            "null_traj": {r: nulls.trajectories[r] for r in NULL_REASONS},
            "null_turn": {r: nulls.turns[r] for r in NULL_REASONS},
        }

    def fill(self, record: dict[str, Any]) -> None:
        """Set the advantages of the record's turns (each turn's last keys), once:
        its entry is dropped, so the table shrinks as the second pass goes."""
        packed = self._packed.pop(record["trajectory_id"])
        for i, turn in enumerate(record["turns"]):
            for k, name in enumerate(ADVANTAGES):
                v = packed[3 * i + k]
                turn[name] = None if math.isnan(v) else v
