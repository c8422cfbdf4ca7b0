"""The weights of a trajectory's return R_i (config `export.return_weights`): one record,
held by the corpus summary, by each rollout row and by the advantage computation."""

from __future__ import annotations

from grumem.records.base import Number, Record

__all__ = ["EQUAL_WEIGHTS", "ReturnWeights"]


class ReturnWeights(Record, frozen=True):
    r_update: Number  # times the mean r_update over the trajectory's turns
    r_exit: Number  # only when r_exit is a value
    r_format: Number


EQUAL_WEIGHTS = ReturnWeights(r_update=1.0, r_exit=1.0, r_format=1.0)  # the config's defaults
