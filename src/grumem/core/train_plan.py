"""The online trainer's settings, checked against the sessions files before verl starts.

verl 0.9.1 reads its batch settings in prompts, but a grumem training row is a
turn: one sessions row (a query over a session) gives rollout.n rollouts, each of
as many training rows as turns it ran (every chunk at L1, up to its exit at L2).
So the settings here count sessions rows, and are converted once:

- `batch` is data.train_batch_size: sessions rows a training step. verl makes
  len(train) // batch steps an epoch (its dataloader drops the last partial
  batch), so a batch larger than the training file makes 0 steps an epoch and
  verl stops with a ZeroDivisionError after its first validation.
- `mini_batch` is sessions rows an optimiser step. verl's mini-batch is
  actor.ppo_mini_batch_size x rollout.n training rows (trainer_base.py,
  _update_actor), and it pads a step's rows to a multiple of that
  (_get_required_batch_multiple): ppo_mini_batch_size is therefore mini_batch x
  the turns a rollout reads (a sessions row's chunks, rounded up: exact at L1,
  at most that at L2). It must divide the batch, so that a step is batch /
  mini_batch optimiser steps.

Pure: the callers read the files (grumem.verl.online_overrides.split_shape) and
print or run what is decided here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grumem.errors import TrainPlanError

__all__ = ["OnlinePlan", "SplitShape", "check_online_plan", "ppo_mini_batch_size"]

HELD_OUT = ("val", "test")  # extra_info.split values a training file must not hold


@dataclass(frozen=True)
class SplitShape:
    """What the checks need of one sessions file: where it is, its rows, its chunks
    (the turns a rollout reads at L1) over all rows, the (project, session) pairs it
    holds and the extra_info.split values its rows name."""

    path: str
    rows: int
    chunks: int
    sessions: frozenset[tuple[str, str]]
    splits: frozenset[str]

    @property
    def turns_per_row(self) -> int:
        """The turns a rollout of a row reads at L1, on average, rounded up (at least 1)."""
        return max(1, math.ceil(self.chunks / self.rows)) if self.rows else 1


@dataclass(frozen=True)
class OnlinePlan:
    """The settings, in sessions rows (module docstring): `batch` a training step,
    `mini_batch` an optimiser step, `val_batch` a validation batch (None: the whole
    validation file at once); `save_freq`, `test_freq` and `steps` in training steps."""

    batch: int
    mini_batch: int
    rollout_n: int
    save_freq: int
    test_freq: int
    val_batch: int | None = None
    steps: int | None = None  # training steps; None: not set (verl's epochs decide)


def ppo_mini_batch_size(plan: OnlinePlan, train: SplitShape) -> int:
    """actor.ppo_mini_batch_size for `plan.mini_batch` sessions rows an optimiser step."""
    return plan.mini_batch * train.turns_per_row


def check_online_plan(plan: OnlinePlan, train: SplitShape, val: SplitShape) -> None:
    """TrainPlanError naming every setting that cannot run on these files (none: None)."""
    problems = _file_problems(train, val) + _batch_problems(plan, train, val)
    if plan.rollout_n < 2:
        problems.append(
            f"rollout.n {plan.rollout_n}: the advantages are normalised within the rollouts"
            " of a row, so a group needs at least 2"
        )
    for name, value in (("save_freq", plan.save_freq), ("test_freq", plan.test_freq)):
        if value < 1:
            problems.append(
                f"{name} {value}: give a number of training steps, at least 1 (verl saves"
                " or validates at every multiple of it and at the last step)"
            )
    if plan.steps is not None and plan.steps < 1:
        problems.append(f"steps {plan.steps}: give at least 1 training step")
    if problems:
        raise TrainPlanError(problems)


def _file_problems(train: SplitShape, val: SplitShape) -> list[str]:
    out = []
    if train.path == val.path:
        out.append(
            f"the training and validation files are both {train.path}: validate on"
            " held-out sessions (an export's sessions-val.parquet, or --val-corpus)"
        )
    else:
        shared = sorted(train.sessions & val.sessions)
        if shared:
            project, session = shared[0]
            out.append(
                f"{len(shared)} session(s) are in both {train.path} and {val.path}"
                f" (first: {project}/{session}): validation must hold out sessions the"
                " policy is not trained on"
            )
    held_out = sorted(train.splits & set(HELD_OUT))
    if held_out:
        out.append(
            f"{train.path} holds rows of split {', '.join(held_out)} (extra_info.split):"
            " train on the export's sessions-train.parquet"
        )
    for what, shape in (("training", train), ("validation", val)):
        if shape.rows == 0:
            out.append(f"the {what} file {shape.path} has no rows")
    return out


def _batch_problems(plan: OnlinePlan, train: SplitShape, val: SplitShape) -> list[str]:
    out = []
    if plan.batch < 1:
        out.append(f"batch {plan.batch}: give at least 1 sessions row a step")
    elif train.rows and plan.batch > train.rows:
        out.append(
            f"batch {plan.batch} sessions rows a step is more than the {train.rows} rows of"
            f" {train.path}: verl would make {train.rows} // {plan.batch} = 0 steps an epoch;"
            f" give a batch of at most {train.rows}"
        )
    if plan.val_batch is not None and (plan.val_batch < 1 or plan.val_batch > val.rows > 0):
        out.append(
            f"validation batch {plan.val_batch} sessions rows: give 1 to the {val.rows} rows"
            f" of {val.path}"
        )
    if plan.mini_batch < 1 or plan.mini_batch > plan.batch >= 1:
        out.append(
            f"mini-batch {plan.mini_batch} sessions rows an optimiser step: give 1 to the"
            f" batch, {plan.batch}"
        )
    elif plan.batch >= 1 and plan.batch % plan.mini_batch:
        out.append(
            f"mini-batch {plan.mini_batch} does not divide the batch {plan.batch}: verl pads"
            " a step's turn rows to a multiple of the mini-batch's, so a step of"
            f" {plan.batch} sessions rows would train as"
            f" {math.ceil(plan.batch / plan.mini_batch)} mini-batches of {plan.mini_batch},"
            f" the last padded; give a divisor of {plan.batch}"
        )
    return out
