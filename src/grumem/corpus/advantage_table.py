"""The corpus's per-turn advantages (grumem.advantages, paper Eq. 12-13), computed
between the export's two passes and held until the second has written every turn.

A group (the samples of one project, query and session) need not be contiguous
in the log, so the first pass keeps a few numbers per trajectory, packed
(`Scores`: ~10 bytes a turn); the groups are then scored one at a time and the
table keeps what the advantages are made of, not a value per turn: each
trajectory's A_traj, and each group's A_turn per (t, r_update), which is the
same for every sample of the group with that r_update at that t. Â is mixed
again when a turn is filled, by the same function (grumem.advantages.mix) on
the same numbers, so it is the value group_advantages computed. Peak memory
then grows by ~20 bytes a turn, not ~120 (a 1M-turn export held 116 MiB more
than a 100k one).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from typing import Any

from grumem.advantages import (
    NULL_REASONS,
    NullCounts,
    ReturnWeights,
    ScoredTrajectory,
    group_advantages,
    mix,
)


class Scores:
    """What advantages need of every exported trajectory, packed, in log order."""

    def __init__(self) -> None:
        self._groups: dict[Hashable, int] = {}
        self._members: list[list[int]] = []  # group -> trajectory indices
        self.ids: list[str] = []
        self._packed: list[tuple[int, bytes, array | None, float | None, int] | None] = []
        self.turns = 0

    def add(self, record: dict[str, Any]) -> None:
        """A corpus record's rewards (its turns' t and r_update, r_exit, r_format)."""
        key = (record["project"], record["query_id"], record["session"])
        g = self._groups.setdefault(key, len(self._groups))
        if g == len(self._members):
            self._members.append([])
        self._members[g].append(len(self.ids))
        turns = record["turns"]
        ts = [turn["t"] for turn in turns]
        r_update = bytes(turn["r_update"] > 0 for turn in turns)
        # t is 1, 2, ... in every exported trajectory; kept apart only if not
        dense = None if ts == list(range(1, len(ts) + 1)) else array("q", ts)
        self.ids.append(record["trajectory_id"])
        self._packed.append((g, r_update, dense, record["r_exit"], record["r_format"]))
        self.turns += len(turns)

    @property
    def groups(self) -> int:
        return len(self._members)

    def take_group(self, g: int) -> tuple[list[int], list[ScoredTrajectory]]:
        """Trajectory indices of group `g` and what advantages need of each, in log
        order; their packed numbers are dropped (the table grows as these go)."""
        idx = self._members[g]
        out = []
        for i in idx:
            group, r_update, dense, r_exit, r_format = self._packed[i]
            self._packed[i] = None
            ts = dense if dense is not None else range(1, len(r_update) + 1)
            pairs = tuple((t, 1 if r else -1) for t, r in zip(ts, r_update, strict=True))
            out.append(ScoredTrajectory(group, pairs, r_exit, r_format))
        return idx, out


class AdvantageTable:
    """Every exported turn's advantages, by trajectory id, and the summary's account."""

    def __init__(self, scores: Scores, alpha: float, weights: ReturnWeights):
        self._alpha = alpha
        nulls = NullCounts()
        # trajectory id -> (group, A_traj); group -> {(t, r_update): A_turn}
        self._traj: dict[str, tuple[int, float | None]] = {}
        self._turn: list[dict[tuple[int, int], float | None]] = []
        for g in range(scores.groups):
            idx, group = scores.take_group(g)
            turn_values: dict[tuple[int, int], float | None] = {}
            for i, traj, turns in zip(
                idx, group, group_advantages(group, alpha, weights, nulls=nulls), strict=True
            ):
                a_traj = turns[0].advantage_traj if turns else None
                self._traj[scores.ids[i]] = (g, a_traj)
                for (t, r), adv in zip(traj.r_update, turns, strict=True):
                    turn_values[t, r] = adv.advantage_turn
            self._turn.append(turn_values)
        turns = scores.turns
        self.summary: dict[str, Any] = {
            "alpha": alpha,
            "return_weights": {
                "r_update": weights.r_update,
                "r_exit": weights.r_exit,
                "r_format": weights.r_format,
            },
            "groups": scores.groups,
            "turns_with_advantage": turns - nulls.advantage,
            "turns_without_advantage": nulls.advantage,
            "null_traj": {r: nulls.trajectories[r] for r in NULL_REASONS},
            "null_turn": {r: nulls.turns[r] for r in NULL_REASONS},
        }

    def fill(self, record: dict[str, Any]) -> None:
        """Set the advantages of the record's turns (each turn's last keys), once:
        its entry is dropped, so the table shrinks as the second pass goes."""
        g, a_traj = self._traj.pop(record["trajectory_id"])
        values = self._turn[g]
        for turn in record["turns"]:
            a_turn = values[turn["t"], turn["r_update"]]
            turn["advantage"] = mix(self._alpha, a_traj, a_turn)
            turn["advantage_traj"] = a_traj
            turn["advantage_turn"] = a_turn
