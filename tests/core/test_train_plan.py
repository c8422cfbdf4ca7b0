"""The online trainer's settings against the sessions files (grumem.core.train_plan):
every refusal names the setting, its value and what it was checked against."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.core.train_plan import OnlinePlan, SplitShape, check_online_plan, ppo_mini_batch_size
from grumem.errors import TrainPlanError

TRAIN = SplitShape(
    path="/c/sessions-train.parquet",
    rows=10,
    chunks=72,  # 7.2 chunks a row: a rollout reads 8 turns at most, on average 7.2
    sessions=frozenset({("demo", f"s{i}") for i in range(5)}),
    splits=frozenset({"train"}),
)
VAL = SplitShape(
    path="/c/sessions-val.parquet",
    rows=4,
    chunks=20,
    sessions=frozenset({("demo", "v1"), ("demo", "v2")}),
    splits=frozenset({"val"}),
)
PLAN = OnlinePlan(batch=10, mini_batch=5, rollout_n=4, save_freq=1, test_freq=1)


def problems(plan: OnlinePlan = PLAN, train: SplitShape = TRAIN, val: SplitShape = VAL) -> str:
    with pytest.raises(TrainPlanError) as e:
        check_online_plan(plan, train, val)
    return str(e.value)


def with_(plan: OnlinePlan = PLAN, **kw) -> OnlinePlan:
    return OnlinePlan(**{**plan.__dict__, **kw})


def test_a_plan_that_fits_passes() -> None:
    check_online_plan(PLAN, TRAIN, VAL)


def test_a_batch_over_the_training_rows_names_both_numbers() -> None:
    """verl: steps_per_epoch = 10 // 32 = 0, then a ZeroDivisionError after validation."""
    msg = problems(with_(batch=32, mini_batch=32))
    assert "batch 32 sessions rows a step is more than the 10 rows of" in msg
    assert "/c/sessions-train.parquet" in msg and "10 // 32 = 0 steps an epoch" in msg
    assert "at most 10" in msg


def test_the_validation_batch_is_checked_against_the_validation_rows() -> None:
    msg = problems(with_(val_batch=5))
    assert "validation batch 5 sessions rows: give 1 to the 4 rows of /c/sessions-val" in msg
    check_online_plan(with_(val_batch=4), TRAIN, VAL)


def test_the_mini_batch_must_divide_the_batch() -> None:
    msg = problems(with_(mini_batch=3))
    assert "mini-batch 3 does not divide the batch 10" in msg
    assert "4 mini-batches of 3, the last padded" in msg
    assert "mini-batch 12 sessions rows an optimiser step: give 1 to the batch, 10" in problems(
        with_(mini_batch=12)
    )


def test_a_group_needs_two_rollouts() -> None:
    assert "rollout.n 1: " in problems(with_(rollout_n=1))


def test_checkpoints_and_validation_need_a_frequency() -> None:
    msg = problems(with_(save_freq=0, test_freq=-1))
    assert "save_freq 0: " in msg and "test_freq -1: " in msg


def test_validation_never_reads_the_training_file_or_its_sessions() -> None:
    same = SplitShape(TRAIN.path, 10, 72, TRAIN.sessions, frozenset({"train"}))
    assert "the training and validation files are both /c/sessions-train.parquet" in problems(
        val=same
    )
    leaky = SplitShape("/c/other.parquet", 2, 9, frozenset({("demo", "s3")}), frozenset())
    assert "1 session(s) are in both" in problems(val=leaky) and "demo/s3" in problems(val=leaky)


def test_a_training_file_with_held_out_rows_is_refused() -> None:
    """The export's sessions.parquet holds every split: training on it trains on val/test."""
    everything = SplitShape(TRAIN.path, 14, 92, TRAIN.sessions, frozenset({"train", "val"}))
    assert "holds rows of split val (extra_info.split)" in problems(train=everything)


def test_every_problem_is_named_at_once() -> None:
    e = pytest.raises(
        TrainPlanError, check_online_plan, with_(batch=32, mini_batch=5, rollout_n=1), TRAIN, VAL
    ).value
    assert len(e.problems) == 3


def test_the_mini_batch_is_converted_to_turn_rows() -> None:
    """verl's mini-batch is ppo_mini_batch_size x n training rows, a row a turn: 5 sessions
    rows of 7.2 chunks each read 36 turns a rollout, so 5 x 8 covers them (rounded up)."""
    assert ppo_mini_batch_size(PLAN, TRAIN) == 40
    assert TRAIN.turns_per_row == 8


@given(
    rows=st.integers(min_value=1, max_value=50),
    batch=st.integers(min_value=1, max_value=60),
    mini=st.integers(min_value=1, max_value=60),
)
def test_a_plan_passes_exactly_when_verl_can_run_it(rows, batch, mini) -> None:
    """Passes iff at least one step an epoch (rows // batch >= 1) and batch / mini whole
    optimiser steps; then the converted mini-batch divides the batch's turn rows at L1
    whenever every row has the same number of chunks."""
    train = SplitShape(TRAIN.path, rows, rows * 3, TRAIN.sessions, TRAIN.splits)
    plan = with_(batch=batch, mini_batch=mini)
    ok = rows // batch >= 1 and mini <= batch and batch % mini == 0
    try:
        check_online_plan(plan, train, VAL)
    except TrainPlanError:
        assert not ok
    else:
        assert ok
        turn_rows = batch * 3 * plan.rollout_n
        assert turn_rows % (ppo_mini_batch_size(plan, train) * plan.rollout_n) == 0
