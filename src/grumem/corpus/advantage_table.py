"""The corpus's per-turn advantages (grumem.core.advantages, paper Eq. 12-13), computed
between the export's two passes and held until the second has written every turn.

A group (the samples of one project, query and session) need not be contiguous
in the log, so the first pass keeps a few numbers per trajectory, packed
(`Scores`: ~4 bytes a turn); the groups are then scored one at a time and the
table keeps what the advantages are made of, not a value per turn: each
trajectory's A_traj, and each group's A_turn per (t, r_update), which is the
same for every sample of the group with that r_update at that t. Â is mixed
again when a turn is filled, by the same function (grumem.core.advantages.mix) on
the same numbers, so it is the value group_advantages computed. Peak memory
then grows by a few bytes a turn, not ~120 (a 1M-turn export held 116 MiB
more than a 100k one).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TypeAlias

from grumem.core.advantages import (
    ROW,
    SINGLE_SAMPLE,
    ZERO_VARIANCE,
    NullCounts,
    ScoredTrajectory,
    group_advantages,
    mix,
)
from grumem.errors import GrumemError
from grumem.records.return_weights import ReturnWeights
from grumem.records.summary import Advantages, NullReasons

# a turn's (advantage, advantage_traj, advantage_turn): Â, Â_traj, Â_turn
Advantage: TypeAlias = tuple[float | None, float | None, float | None]


class Scores:
    """What advantages need of every exported trajectory, packed in arrays (~4 bytes
    a turn), by its place among the exported trajectories: the second pass meets
    them in the same order."""

    def __init__(self) -> None:
        self._groups: dict[Hashable, int] = {}
        self._keys: list[Hashable] = []
        self._members: list[array[int]] = []  # group -> trajectory ordinals
        self.group_of = array("q")  # trajectory ordinal -> group
        self.id_hash = array("q")  # hash of its id: the second pass checks the order
        self._r_update = bytearray()  # one byte a turn: 1 for +1, 0 for -1
        self._start = array("q", [0])  # trajectory ordinal -> its first turn's byte
        self._t: dict[int, array[int]] = {}  # t of a trajectory whose turns are not 1, 2, ...
        self._r_exit = array("d")  # NaN for null
        self._r_format = bytearray()

    def add(self, trajectory_id: str, scored: ScoredTrajectory) -> None:
        """A trajectory's rewards: its turns' t and r_update, r_exit, r_format."""
        key = scored.group
        g = self._groups.setdefault(key, len(self._groups))
        if g == len(self._members):
            self._keys.append(key)
            self._members.append(array("q"))
        i = len(self.group_of)
        self._members[g].append(i)
        self.group_of.append(g)
        self.id_hash.append(hash(trajectory_id))
        ts = [t for t, _ in scored.r_update]
        if ts != list(range(1, len(ts) + 1)):
            self._t[i] = array("q", ts)
        self._r_update += bytes(r > 0 for _, r in scored.r_update)
        self._start.append(len(self._r_update))
        r_exit = scored.r_exit
        self._r_exit.append(math.nan if r_exit is None else r_exit)
        self._r_format.append(scored.r_format)

    @property
    def groups(self) -> int:
        return len(self._members)

    @property
    def turns(self) -> int:
        return len(self._r_update)

    def group(self, g: int) -> tuple[array[int], list[ScoredTrajectory]]:
        """Trajectory ordinals of group `g` and what advantages need of each, in log order."""
        idx = self._members[g]
        out = []
        for i in idx:
            bits = self._r_update[self._start[i] : self._start[i + 1]]
            ts = self._t.get(i) or range(1, len(bits) + 1)
            pairs = tuple((t, 1 if r else -1) for t, r in zip(ts, bits, strict=True))
            stored = self._r_exit[i]
            r_exit = None if math.isnan(stored) else stored
            out.append(ScoredTrajectory(self._keys[g], pairs, r_exit, self._r_format[i]))
        return idx, out


class AdvantageTable:
    """Every exported turn's advantages, by the trajectory's place among the exported
    ones, and the summary's account."""

    def __init__(
        self, scores: Scores, alpha: float, weights: ReturnWeights, turn_weighting: str = ROW
    ):
        self._alpha = alpha
        nulls = NullCounts()
        self._group_of, self._id_hash = scores.group_of, scores.id_hash
        # trajectory ordinal -> A_traj (NaN for null); group -> {(t, r_update): A_turn}
        self._traj = array("d", bytes(8 * len(scores.group_of)))
        self._turn: list[dict[tuple[int, int], float | None]] = []
        for g in range(scores.groups):
            idx, group = scores.group(g)
            turn_values: dict[tuple[int, int], float | None] = {}
            for i, traj, turns in zip(
                idx,
                group,
                group_advantages(group, alpha, weights, nulls=nulls, turn_weighting=turn_weighting),
                strict=True,
            ):
                a_traj = turns[0].advantage_traj if turns else None
                self._traj[i] = math.nan if a_traj is None else a_traj
                for (t, r), adv in zip(traj.r_update, turns, strict=True):
                    turn_values[t, r] = adv.advantage_turn
            self._turn.append(turn_values)
        self._next = 0
        self.summary = Advantages(
            alpha=alpha,
            return_weights=weights,
            groups=scores.groups,
            turns_with_advantage=scores.turns - nulls.advantage,
            turns_without_advantage=nulls.advantage,
            null_traj=_null_reasons(nulls.trajectories),
            null_turn=_null_reasons(nulls.turns),
        )

    def next(self, trajectory_id: str, turns: Sequence[tuple[int, int]]) -> list[Advantage]:
        """The advantages of the next exported trajectory's turns, (t, r_update) each: it
        must be the one the scoring pass met at that place."""
        i = self._next
        self._next += 1
        if i >= len(self._id_hash) or hash(trajectory_id) != self._id_hash[i]:
            raise GrumemError(
                f"trajectory {trajectory_id!r} is not the one the export's first"
                " pass scored at its place: the log changed while it was read; rerun"
            )
        stored = self._traj[i]
        a_traj = None if math.isnan(stored) else stored
        values = self._turn[self._group_of[i]]
        alpha = self._alpha
        return [(mix(alpha, a_traj, values[key]), a_traj, values[key]) for key in turns]


def _null_reasons(counts: Counter[str]) -> NullReasons:
    return NullReasons(single_sample=counts[SINGLE_SAMPLE], zero_variance=counts[ZERO_VARIANCE])
