"""Paper Eq. 12-13 advantages (grumem.core.advantages): hand-computed cases and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.core.advantages import (
    ROW,
    SINGLE_SAMPLE,
    TRAJECTORY,
    TURN_WEIGHTINGS,
    ZERO_VARIANCE,
    ScoredTrajectory,
    advantages,
    group_advantages,
    trajectory_return,
)
from grumem.records.return_weights import ReturnWeights


def traj(updates, r_exit=0.0, r_format=1, group="g"):
    return ScoredTrajectory(group, tuple(enumerate(updates, start=1)), r_exit, r_format)


def test_hand_computed_two_samples() -> None:
    a, b = traj([1, 1], r_exit=0.0), traj([1, -1], r_exit=-0.5)
    # R_a = 1 + 0 + 1 = 2, R_b = 0 - 0.5 + 1 = 0.5: mean 1.25, std 0.75
    assert trajectory_return(a) == 2.0 and trajectory_return(b) == 0.5
    (ta, tb) = group_advantages([a, b], alpha=0.9, eps=0.0)
    assert ta[0].advantage_traj == pytest.approx(1.0) and tb[0].advantage_traj == pytest.approx(-1)
    # t=1: both +1, no variance: A_turn null, so A null (alpha is not 1)
    assert ta[0].advantage_turn is None and ta[0].advantage is None
    # t=2: +1 vs -1 -> +1 / -1
    assert ta[1].advantage_turn == pytest.approx(1.0)
    assert ta[1].advantage == pytest.approx(0.9 * 1 + 0.1 * 1)
    assert tb[1].advantage == pytest.approx(0.9 * -1 + 0.1 * -1)


def test_r_outcome_and_null_r_exit_do_not_enter_the_return() -> None:
    w = ReturnWeights(r_update=2.0, r_exit=3.0, r_format=5.0)
    assert trajectory_return(traj([1, -1, 1], r_exit=None, r_format=1), w) == pytest.approx(
        2 * (1 / 3) + 5
    )
    assert trajectory_return(traj([1], r_exit=-0.75, r_format=0), w) == pytest.approx(2 - 2.25)


def test_group_of_one_is_null_never_zero() -> None:
    (only,) = group_advantages([traj([1, -1])])
    assert all(
        t.advantage is None and t.advantage_traj is None and t.advantage_turn is None for t in only
    )
    _, nulls, groups = advantages([traj([1, -1])])
    assert groups == 1
    assert nulls.trajectories[SINGLE_SAMPLE] == 1 and nulls.turns[SINGLE_SAMPLE] == 2
    assert nulls.advantage == 2


def test_zero_variance_group_is_null_with_reason() -> None:
    out, nulls, _ = advantages([traj([1, -1]), traj([1, -1])])
    assert all(t.advantage is None for turns in out for t in turns)
    assert nulls.trajectories[ZERO_VARIANCE] == 2 and nulls.turns[ZERO_VARIANCE] == 4


def test_null_r_exit_still_has_a_turn_advantage() -> None:
    (a, b) = group_advantages([traj([1], r_exit=None), traj([-1], r_exit=None)])
    assert a[0].advantage_turn is not None and b[0].advantage_turn is not None


def test_turns_only_among_those_that_exist() -> None:
    # an L2 trajectory that stopped at t=1: t=2 exists in one sample only
    (a, b, c) = group_advantages([traj([1, 1]), traj([-1]), traj([1, -1])])
    assert len(b) == 1
    assert a[1].advantage_turn == pytest.approx(1.0, rel=1e-5)
    assert c[1].advantage_turn == pytest.approx(-1.0, rel=1e-5)


# --------------------------------------------------- turn_weighting: row | trajectory

# an L2 group of two: A read three chunks, B stopped after the first
L2_GROUP = [traj([1, -1, 1]), traj([-1])]


def test_row_weighting_leaves_a_turn_one_rollout_reached_without_a_baseline() -> None:
    """row: t=1 compares A's +1 with B's -1; t=2 and t=3 only A reached: nothing to
    compare with, null (the trainer's 0), counted as single_sample."""
    (a, b), nulls, _ = advantages(L2_GROUP, alpha=0.9, eps=0.0, turn_weighting=ROW)
    assert [x.advantage_turn for x in a] == [1.0, None, None]
    assert [x.advantage_turn for x in b] == [-1.0]
    assert nulls.turns[SINGLE_SAMPLE] == 2


def test_trajectory_weighting_hand_computed() -> None:
    """trajectory: A's mean r_update 1/3, B's -1: mu = (1/3 - 1)/2 = -1/3; variance =
    ((4/3)^2 + (2/3)^2 + (4/3)^2)/3 for A = 4/3, (2/3)^2 = 4/9 for B, their mean 8/9:
    sigma = sqrt(8/9). A turn's value is its own r_update against that: +1 -> (4/3)/sigma
    = sqrt(2), -1 -> (-2/3)/sigma = -1/sqrt(2), also at t=2 and t=3, which only A reached.
    Pooling the four turns unweighted would give mu = 0: A's three turns outweighing B."""
    (a, b), nulls, _ = advantages(L2_GROUP, alpha=0.9, eps=0.0, turn_weighting=TRAJECTORY)
    s2, h = math.sqrt(2), 1 / math.sqrt(2)
    assert [x.advantage_turn for x in a] == pytest.approx([s2, -h, s2])
    assert [x.advantage_turn for x in b] == pytest.approx([-h])
    assert sum(nulls.turns.values()) == 0
    # the trajectory term is the same under both rules
    rows = group_advantages(L2_GROUP, alpha=0.9, eps=0.0, turn_weighting=ROW)
    assert [x.advantage_traj for x in a] == [x.advantage_traj for x in rows[0]]
    assert a[1].advantage == pytest.approx(0.9 * a[1].advantage_traj + 0.1 * -h)


def test_trajectory_weighting_nulls() -> None:
    (only,), nulls, _ = advantages([traj([1, -1])], turn_weighting=TRAJECTORY)
    assert [x.advantage_turn for x in only] == [None, None]
    assert nulls.turns[SINGLE_SAMPLE] == 2
    # every turn of the group equal: nothing to learn from, whatever the lengths
    (a, b), nulls, _ = advantages([traj([1, 1, 1]), traj([1])], turn_weighting=TRAJECTORY)
    assert all(x.advantage_turn is None for x in a + b)
    assert nulls.turns[ZERO_VARIANCE] == 4


def test_an_unknown_turn_weighting_is_refused() -> None:
    with pytest.raises(ValueError, match="turn_weighting 'turn'"):
        group_advantages(L2_GROUP, turn_weighting="turn")


def test_alpha_outside_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        group_advantages([traj([1]), traj([-1])], alpha=1.5)


# ---------------------------------------------------------------- properties

r_updates = st.lists(st.sampled_from([1, -1]), min_size=1, max_size=6)
trajectories = st.builds(
    traj,
    r_updates,
    r_exit=st.sampled_from([0.0, -0.75, -0.5, None]),
    r_format=st.sampled_from([0, 1]),
)
groups = st.lists(trajectories, min_size=1, max_size=6)
alphas = st.floats(min_value=0, max_value=1)


@given(groups, alphas)
def test_advantages_sum_to_zero_per_level(group, alpha) -> None:
    out = group_advantages(group, alpha=alpha)
    traj_level = [turns[0].advantage_traj for turns in out]
    if traj_level[0] is not None:
        assert math.fsum(traj_level) == pytest.approx(0, abs=1e-6)
    by_t: dict[int, list[float]] = {}
    for turns in out:
        for turn in turns:
            if turn.advantage_turn is not None:
                by_t.setdefault(turn.t, []).append(turn.advantage_turn)
    for values in by_t.values():
        assert math.fsum(values) == pytest.approx(0, abs=1e-6)
    # A_traj is one value per trajectory, on every one of its turns
    assert all(len({t.advantage_traj for t in turns}) == 1 for turns in out)


@given(groups, alphas, st.randoms(use_true_random=False))
def test_permuting_samples_permutes_advantages(group, alpha, rnd) -> None:
    order = list(range(len(group)))
    rnd.shuffle(order)
    out = group_advantages(group, alpha=alpha)
    permuted = group_advantages([group[i] for i in order], alpha=alpha)
    for k, i in enumerate(order):
        for x, y in zip(permuted[k], out[i], strict=True):
            for name in ("advantage", "advantage_traj", "advantage_turn"):
                a, b = getattr(x, name), getattr(y, name)
                assert (a is None) == (b is None)
                if a is not None:
                    assert a == pytest.approx(b, abs=1e-9)


@given(groups)
def test_alpha_one_broadcasts_the_trajectory_advantage(group) -> None:
    for turns in group_advantages(group, alpha=1.0):
        assert all(t.advantage == turns[0].advantage_traj for t in turns)


@given(st.lists(groups, min_size=1, max_size=4), alphas)
def test_groups_are_independent(many, alpha) -> None:
    flat = [
        ScoredTrajectory(g, tr.r_update, tr.r_exit, tr.r_format)
        for g, group in enumerate(many)
        for tr in group
    ]
    out, _, n = advantages(flat, alpha=alpha)
    assert n == len(many)
    k = 0
    for group in many:
        alone = group_advantages(group, alpha=alpha)
        assert out[k : k + len(group)] == alone
        k += len(group)


@given(groups, alphas)
def test_trajectory_weighting_balances_each_trajectory_as_one(group, alpha) -> None:
    """Each trajectory's mean Â_turn, summed over the group, is 0 (the baseline is the
    mean of the trajectories' means), whatever their lengths."""
    out = group_advantages(group, alpha=alpha, turn_weighting=TRAJECTORY)
    turns = [[t.advantage_turn for t in ts] for ts in out]
    if turns[0][0] is not None:
        assert math.fsum(math.fsum(ts) / len(ts) for ts in turns) == pytest.approx(0, abs=1e-6)
    # one rule for the whole group: a turn's value is a function of its r_update alone
    values: dict[int, set[float | None]] = {}
    for tr, ts in zip(group, out, strict=True):
        for (_, r), a in zip(tr.r_update, ts, strict=True):
            values.setdefault(r, set()).add(
                None if a.advantage_turn is None else round(a.advantage_turn, 9)
            )
    assert all(len(v) == 1 for v in values.values())


@given(
    st.integers(min_value=1, max_value=5).flatmap(
        lambda n: st.lists(
            st.lists(st.sampled_from([1, -1]), min_size=n, max_size=n), min_size=2, max_size=6
        )
    )
)
def test_trajectory_weighting_of_equal_lengths_pools_the_turns(updates) -> None:
    """Trajectories of one length (L1, every chunk read) weigh alike: the rule is the plain
    normalisation over all the group's turns."""
    group = [traj(u) for u in updates]
    out = group_advantages(group, turn_weighting=TRAJECTORY)
    flat = [r for u in updates for r in u]
    if min(flat) == max(flat):
        assert all(t.advantage_turn is None for ts in out for t in ts)
        return
    mean = sum(flat) / len(flat)
    std = math.sqrt(sum((r - mean) ** 2 for r in flat) / len(flat))
    for u, ts in zip(updates, out, strict=True):
        assert [t.advantage_turn for t in ts] == pytest.approx(
            [(r - mean) / (std + 1e-6) for r in u]
        )


@given(groups, alphas, st.sampled_from(TURN_WEIGHTINGS), st.randoms(use_true_random=False))
def test_either_rule_is_invariant_to_the_order_of_samples(group, alpha, rule, rnd) -> None:
    order = list(range(len(group)))
    rnd.shuffle(order)
    out = group_advantages(group, alpha=alpha, turn_weighting=rule)
    permuted = group_advantages([group[i] for i in order], alpha=alpha, turn_weighting=rule)
    for k, i in enumerate(order):
        for x, y in zip(permuted[k], out[i], strict=True):
            a, b = x.advantage_turn, y.advantage_turn
            assert (a is None) == (b is None)
            if a is not None:
                assert a == pytest.approx(b, abs=1e-9)
