"""The group step: after the rollout.n rollouts of one sessions row, every turn's
rewards and the paper's advantages (Eq. 12-13), by the export's own functions.

- grumem.core.rewards.score_trajectory gives each rollout r_update per turn
  (against its chunk's label), r_exit from its own exit gates (t_last_evidence
  over all the session's chunks: an L2 rollout that stopped never saw the later
  ones) and r_format (every turn parsed; a rollout asks once a turn).
- grumem.core.advantages.group_advantages normalises within the group with the
  row's α, return weights and turn weighting, exactly as the export does: the
  turn term among the rollouts that reached the same t (`row`, the paper's
  reading), or among all the group's turns with each rollout weighted as one
  (`trajectory`). At L2 a late t may be reached by one rollout only: under `row`
  its turn term has nothing to compare with (0 here, null in the export), under
  `trajectory` it is compared with the whole group. Each turn says how many
  rollouts reached its t (`reached`), and the metrics count the turns one
  rollout reached.
- Training needs a number where the export keeps null: a term without variance
  (every return, or every r_update at that t, equal; or a single value) is
  (v − mean)/(std + ε) = 0 by the formula, so it enters Â as 0 and is counted.
  The offline corpus keeps its null.

The group's turn scores are what grumem.verl's worker hands verl: Â per turn in
training, the rollout's return R_i per turn in validation (no group there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grumem.core.advantages import (
    NullCounts,
    ScoredTrajectory,
    TurnAdvantage,
    group_advantages,
    mix,
    trajectory_return,
)
from grumem.core.rewards import TrajectoryRewards, TurnGates, score_trajectory
from grumem.records.rollout_row import RolloutRow, RowChunk
from grumem.verl.rollout import RolloutTurn

ON_TIME, EARLY, LATE = "on_time", "early", "late"


@dataclass(frozen=True)
class TurnValues:
    t: int
    r_update: int
    advantage: float  # the value trained on: null terms enter as 0
    advantage_traj: float | None  # as the export computes them (None: no variance)
    advantage_turn: float | None
    reached: int  # how many rollouts of the group reached this t


@dataclass(frozen=True)
class RolloutValues:
    rewards: TrajectoryRewards
    ret: float  # R_i
    exit: str | None  # on_time, early, late; None when r_exit is null
    turns: tuple[TurnValues, ...]

    def trajectory_fields(self) -> dict[str, Any]:
        """Per-rollout values, as verl's reward_extra_info carries them (numbers only)."""
        r = self.rewards
        return {
            "return": self.ret,
            "r_format": r.r_format,
            "r_exit": r.r_exit,
            "r_update_mean": sum(r.r_update) / len(r.r_update),
            "exit_on_time": int(self.exit == ON_TIME),
            "exit_early": int(self.exit == EARLY),
            "exit_late": int(self.exit == LATE),
        }


@dataclass(frozen=True)
class GroupValues:
    rollouts: tuple[RolloutValues, ...]
    nulls: NullCounts = field(default_factory=NullCounts)

    @property
    def zero_variance(self) -> bool:
        """Every rollout's return is equal (or there is one): Â_traj is 0 for all."""
        return bool(self.nulls.trajectories)


def group_step(row: RolloutRow, rollouts: Sequence[Sequence[RolloutTurn]]) -> GroupValues:
    """Rewards and advantages of the rollouts of one row, in rollout order; each turn's
    label is the row's."""
    if not rollouts or any(not turns for turns in rollouts):
        raise ValueError(f"{row.where}: a group needs rollouts with at least one turn each")
    chunks = row.chunks
    evidence = [(c.t, c.evidence) for c in chunks]
    rewards = [
        score_trajectory([_gates(row.where, chunks, turn) for turn in turns], evidence)
        for turns in rollouts
    ]
    scored = [
        ScoredTrajectory(
            row.extra_info.index,
            tuple((turn.t, r) for turn, r in zip(turns, rw.r_update, strict=True)),
            rw.r_exit,
            rw.r_format,
        )
        for turns, rw in zip(rollouts, rewards, strict=True)
    ]
    alpha, weights = float(row.extra_info.alpha), row.extra_info.return_weights
    nulls = NullCounts()
    table = group_advantages(
        scored, alpha, weights, nulls=nulls, turn_weighting=row.extra_info.turn_weighting
    )
    reached = Counter(t for tr in scored for t, _ in tr.r_update)
    out = []
    for tr, rw, advantages in zip(scored, rewards, table, strict=True):
        turns = tuple(
            _turn_values(alpha, a, r, reached[a.t])
            for a, (_, r) in zip(advantages, tr.r_update, strict=True)
        )
        out.append(RolloutValues(rw, trajectory_return(tr, weights), exit_timing(rw), turns))
    return GroupValues(tuple(out), nulls)


def _gates(where: str, chunks: Sequence[RowChunk], turn: RolloutTurn) -> TurnGates:
    chunk = chunks[turn.t - 1]
    if turn.chunk_sha != chunk.chunk_sha:
        raise ValueError(f"{where}: turn t={turn.t} answered another chunk than the row's")
    return TurnGates(turn.t, turn.parsed, turn.update_gate, turn.exit_gate, chunk.evidence)


def _turn_values(alpha: float, a: TurnAdvantage, r_update: int, reached: int) -> TurnValues:
    # a null term is the formula's 0 here (no variance); the export's null stays beside it
    trained = mix(alpha, _zero(a.advantage_traj), _zero(a.advantage_turn))
    assert trained is not None  # both terms are numbers
    return TurnValues(a.t, r_update, trained, a.advantage_traj, a.advantage_turn, reached)


def _zero(value: float | None) -> float:
    return 0.0 if value is None else value


def exit_timing(rewards: TrajectoryRewards) -> str | None:
    """on_time, early or late: the recorded exit against the last evidence."""
    if rewards.t_exit is None or rewards.t_last_evidence is None:
        return None
    if rewards.t_exit == rewards.t_last_evidence:
        return ON_TIME
    return EARLY if rewards.t_exit < rewards.t_last_evidence else LATE


def step_metrics(rows: Iterable[tuple[str, Mapping[str, Any]]], prefix: str) -> dict[str, float]:
    """verl's per-step metrics over the training rows of a step: (key, the row's
    extra_fields["grumem"]) with verl's key `{uid}_{session}_{i}`.

    Per turn: parse rate, update-gate agreement with the label (an unparsed
    turn does not agree), memory tokens, how many turns' Â_turn had nothing to
    compare with (no variance, or their t reached by one rollout: 0 in training),
    and how many turns' t one rollout alone reached. Per rollout: exit on time / early /
    late / without an exit reward, return. Per group: how many, and how many had
    no variance in their returns (their Â_traj is 0)."""
    turns = []
    rollouts: dict[tuple[str, str], Mapping[str, Any]] = {}
    groups: dict[str, bool] = {}
    for key, g in rows:
        uid, session, _ = key.rsplit("_", 2)
        turns.append(g)
        if g["last"]:
            rollouts[uid, session] = g
        groups[uid] = g["group_zero_variance"]
    if not turns:
        return {}
    p = f"{prefix}/grumem"
    metrics = {
        f"{p}/parse_rate/mean": _mean(g["parsed"] for g in turns),
        f"{p}/update_agreement/mean": _mean(g["r_update"] == 1 for g in turns),
        f"{p}/memory_tokens/mean": _mean(g["memory_tokens"] for g in turns),
        f"{p}/turns/total": len(turns),
        f"{p}/turns/zero_variance_total": sum(g["advantage_turn"] is None for g in turns),
        f"{p}/turns/single_rollout_total": sum(g["reached"] == 1 for g in turns),
        f"{p}/groups/total": len(groups),
        f"{p}/groups/zero_variance_total": sum(groups.values()),
    }
    if rollouts:
        exits = Counter(g["exit"] for g in rollouts.values())
        n = len(rollouts)
        metrics.update(
            {
                f"{p}/exit/on_time_rate": exits[ON_TIME] / n,
                f"{p}/exit/early_rate": exits[EARLY] / n,
                f"{p}/exit/late_rate": exits[LATE] / n,
                f"{p}/exit/no_reward_rate": exits[None] / n,
                f"{p}/return/mean": _mean(g["return"] for g in rollouts.values()),
                f"{p}/r_format/mean": _mean(g["r_format"] for g in rollouts.values()),
            }
        )
    return metrics


def turn_fields(
    turn: RolloutTurn, rollout: RolloutValues, values: TurnValues, group: GroupValues
) -> dict[str, Any]:
    """A turn's extra_fields["grumem"]: the turn, its rewards and advantages, and what
    step_metrics needs of its rollout and group, as plain values (what verl stores)."""
    last = rollout.turns[-1].t == values.t
    return {
        **turn.fields(),
        "r_update": values.r_update,
        "advantage": values.advantage,
        "advantage_traj": values.advantage_traj,
        "advantage_turn": values.advantage_turn,
        "reached": values.reached,
        "last": last,
        "r_exit": rollout.rewards.r_exit,
        "r_exit_reason": rollout.rewards.r_exit_reason,
        "r_format": rollout.rewards.r_format,
        "exit": rollout.exit,
        "return": rollout.ret,
        "group_zero_variance": group.zero_variance,
    }


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values)
