"""Per-turn advantages of the paper (Eq. 12-13): Â = α·Â_traj + (1−α)·Â_turn.

Pure functions over the rewards the export has assembled (grumem.core.rewards).

- A group is the `loop.samples` samples of one (project, query, session): the
  same chunks and question, so their rewards are comparable (GRPO).
- Â_traj normalises each trajectory's return R_i within its group:
  (R_i − mean) / (std + ε), std the population standard deviation (ddof 0).
  R_i = w_update·mean_t(r_update) + w_exit·r_exit + w_format·r_format, the
  trajectory's available components: r_exit enters only when it is a value
  (null has no signal to add), and r_outcome never does: it is null in this
  corpus (extraction has no answer-correctness signal), not 0. r_update
  enters as its mean over the trajectory's turns so that an L2 trajectory
  which stopped early is not scored by how many turns it ran.
- Â_turn normalises r_update within the group by one of two rules
  (`turn_weighting`, the export's setting, carried in each sessions row):
  - `row` (the paper's reading, the default): among the group's turns at the
    same t that exist (an L2 trajectory that stopped has no later turns). At L2
    the policy decides when to stop, so the set at a late t thins out, and a t
    that one trajectory reached has nothing to compare with (null; the trainer's
    0): a late turn's credit is only relative to the rollouts that read on.
  - `trajectory`: among all the group's turns, each trajectory weighted as one
    (its turns share its weight, 1/T_i each): mean μ = mean over trajectories
    of their mean r_update, variance σ² = mean over trajectories of their mean
    (r_update − μ)², both taken per trajectory before they are spread back to
    its turns. A trajectory with many turns does not outweigh a short one in
    the baseline, and a t that one trajectory reached is still compared with
    the whole group.
- No fabricated baseline: a group of one sample, or a set of values without
  variance, has no advantage (None), never 0; the reason is returned so the
  summary can count it. A trajectory whose r_exit is null still has Â_turn.
- Â needs both terms, except that a term weighted 0 is not needed: α = 1
  gives Â = Â_traj on every turn, α = 0 gives Â = Â_turn.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field

from grumem.records.return_weights import EQUAL_WEIGHTS, ReturnWeights

ALPHA = 0.9  # the paper's mix of trajectory and turn advantages
EPS = 1e-6  # keeps (R − mean)/(std + ε) finite for a near-constant group

# how Â_turn's mean and deviation are taken (module docstring)
ROW = "row"  # among the group's turns at the same t
TRAJECTORY = "trajectory"  # among all the group's turns, each trajectory weighted as one
TURN_WEIGHTINGS = (ROW, TRAJECTORY)

# why an advantage is null
SINGLE_SAMPLE = "single_sample"  # nothing in the group to compare with
ZERO_VARIANCE = "zero_variance"  # every value equal: no signal, and 0 would be a fabricated one
NULL_REASONS = (SINGLE_SAMPLE, ZERO_VARIANCE)


@dataclass(frozen=True, slots=True)  # one per exported trajectory, held until all are read
class ScoredTrajectory:
    """What advantages need of one exported trajectory."""

    group: Hashable  # (project, query_id, session)
    r_update: tuple[tuple[int, int], ...]  # (t, r_update) per turn, t ascending
    r_exit: float | None
    r_format: int


@dataclass(frozen=True, slots=True)
class TurnAdvantage:
    t: int
    advantage: float | None
    advantage_traj: float | None
    advantage_turn: float | None


@dataclass
class NullCounts:
    """How many trajectories / turns got a null advantage, and why."""

    trajectories: Counter[str] = field(default_factory=Counter)  # Â_traj null, by reason
    turns: Counter[str] = field(default_factory=Counter)  # Â_turn null, by reason
    advantage: int = 0  # turns whose Â is null


def trajectory_return(traj: ScoredTrajectory, weights: ReturnWeights = EQUAL_WEIGHTS) -> float:
    """R_i: the weighted sum of the trajectory's available reward components."""
    if not traj.r_update:
        raise ValueError("a trajectory without turns has no return")
    mean_update = sum(r for _, r in traj.r_update) / len(traj.r_update)
    value = weights.r_update * mean_update + weights.r_format * traj.r_format
    if traj.r_exit is not None:
        value += weights.r_exit * traj.r_exit
    return value


def normalise(values: Sequence[float], eps: float = EPS) -> tuple[list[float] | None, str | None]:
    """(v − mean)/(std + ε) of each value, or (None, reason) when there is nothing to
    compare: a single value, or values without variance."""
    if len(values) < 2:
        return None, SINGLE_SAMPLE
    if min(values) == max(values):
        return None, ZERO_VARIANCE
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / (std + eps) for v in values], None


def normalise_weighted(
    values: Sequence[Sequence[float]], eps: float = EPS
) -> tuple[list[list[float]] | None, str | None]:
    """normalise() over lists of values, each list weighted as one: a value of a list of
    k values weighs 1/k in the mean and the variance (population, ddof 0). None and the
    reason when there is nothing to compare: fewer than 2 lists, or all values equal."""
    if len(values) < 2:
        return None, SINGLE_SAMPLE
    flat = [v for vs in values for v in vs]
    if min(flat) == max(flat):
        return None, ZERO_VARIANCE
    n = len(values)
    mean = math.fsum(math.fsum(vs) / len(vs) for vs in values) / n
    var = math.fsum(math.fsum((v - mean) ** 2 for v in vs) / len(vs) for vs in values) / n
    std = math.sqrt(var)
    return [[(v - mean) / (std + eps) for v in vs] for vs in values], None


def mix(alpha: float, traj: float | None, turn: float | None) -> float | None:
    """Â = α·Â_traj + (1−α)·Â_turn; a term weighted 0 is not needed, any other null
    term makes Â null."""
    if alpha == 1:
        return traj
    if alpha == 0:
        return turn
    if traj is None or turn is None:
        return None
    return alpha * traj + (1 - alpha) * turn


def group_advantages(
    group: Sequence[ScoredTrajectory],
    alpha: float = ALPHA,
    weights: ReturnWeights = EQUAL_WEIGHTS,
    eps: float = EPS,
    nulls: NullCounts | None = None,
    turn_weighting: str = ROW,
) -> list[list[TurnAdvantage]]:
    """The advantages of every turn of every trajectory of one group, in the
    group's order; null reasons are added to `nulls`."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha {alpha} is outside [0, 1]")
    nulls = NullCounts() if nulls is None else nulls
    traj_adv, reason = normalise([trajectory_return(tr, weights) for tr in group], eps)
    if reason is not None:
        nulls.trajectories[reason] += len(group)
    if turn_weighting == ROW:
        turn_adv = _turn_advantages_by_t(group, eps, nulls)
    elif turn_weighting == TRAJECTORY:
        turn_adv = _turn_advantages_by_trajectory(group, eps, nulls)
    else:
        raise ValueError(f"turn_weighting {turn_weighting!r} is not one of {TURN_WEIGHTINGS}")
    out: list[list[TurnAdvantage]] = []
    for i, tr in enumerate(group):
        a_traj = None if traj_adv is None else traj_adv[i]
        turns = []
        for t, _ in tr.r_update:
            a = mix(alpha, a_traj, turn_adv[i, t])
            nulls.advantage += a is None
            turns.append(TurnAdvantage(t, a, a_traj, turn_adv[i, t]))
        out.append(turns)
    return out


def _turn_advantages_by_t(
    group: Sequence[ScoredTrajectory], eps: float, nulls: NullCounts
) -> dict[tuple[int, int], float | None]:
    """Â_turn of (trajectory, t), r_update normalised among the turns at the same t."""
    at_t: dict[int, list[tuple[int, int]]] = defaultdict(list)  # t -> [(trajectory, r_update)]
    for i, tr in enumerate(group):
        for t, r in tr.r_update:
            at_t[t].append((i, r))
    turn_adv: dict[tuple[int, int], float | None] = {}
    for t, members in at_t.items():
        values, why = normalise([r for _, r in members], eps)
        if why is not None:
            nulls.turns[why] += len(members)
        for k, (i, _) in enumerate(members):
            turn_adv[i, t] = None if values is None else values[k]
    return turn_adv


def _turn_advantages_by_trajectory(
    group: Sequence[ScoredTrajectory], eps: float, nulls: NullCounts
) -> dict[tuple[int, int], float | None]:
    """Â_turn of (trajectory, t), r_update normalised among all the group's turns with
    each trajectory weighted as one."""
    values, why = normalise_weighted([[r for _, r in tr.r_update] for tr in group], eps)
    if why is not None:
        nulls.turns[why] += sum(len(tr.r_update) for tr in group)
    return {
        (i, t): None if values is None else values[i][k]
        for i, tr in enumerate(group)
        for k, (t, _) in enumerate(tr.r_update)
    }


def iter_advantages(
    trajectories: Sequence[ScoredTrajectory],
    alpha: float = ALPHA,
    weights: ReturnWeights = EQUAL_WEIGHTS,
    eps: float = EPS,
    nulls: NullCounts | None = None,
    turn_weighting: str = ROW,
) -> Iterator[tuple[int, list[TurnAdvantage]]]:
    """(index in `trajectories`, its turns' advantages), one group at a time (so a
    caller can keep them compactly), grouped by `group`; null reasons go to `nulls`."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, tr in enumerate(trajectories):
        members[tr.group].append(i)
    for idx in members.values():
        group = group_advantages(
            [trajectories[i] for i in idx], alpha, weights, eps, nulls, turn_weighting
        )
        yield from zip(idx, group, strict=True)


def advantages(
    trajectories: Sequence[ScoredTrajectory],
    alpha: float = ALPHA,
    weights: ReturnWeights = EQUAL_WEIGHTS,
    eps: float = EPS,
    turn_weighting: str = ROW,
) -> tuple[list[list[TurnAdvantage]], NullCounts, int]:
    """Advantages of every turn, in the input's order; with the null counts and the
    number of groups."""
    nulls = NullCounts()
    out: list[list[TurnAdvantage]] = [[] for _ in trajectories]
    for i, turns in iter_advantages(trajectories, alpha, weights, eps, nulls, turn_weighting):
        out[i] = turns
    return out, nulls, len({tr.group for tr in trajectories})
