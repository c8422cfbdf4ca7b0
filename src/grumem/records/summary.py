"""corpus/summary.json (workflow/schemas/summary.schema.yaml): the counts of one
export, written pretty by the export and printed."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

import msgspec

from grumem.records.base import Count, Number, Record, Sha256
from grumem.records.return_weights import ReturnWeights

__all__ = ["CorpusSummary"]

# a share of a count, null when there is nothing to share
Rate: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=0, le=1)] | Annotated[float, msgspec.Meta(ge=0, le=1)] | None
)
Weight: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=0, le=1)] | Annotated[float, msgspec.Meta(ge=0, le=1)]
)
TurnKey = Annotated[str, msgspec.Meta(pattern=r"^[1-9][0-9]*\Z")]


class Levels(Record, frozen=True):
    L1: Count
    L2: Count


class RUpdate(Record, frozen=True):
    positive: Count
    negative: Count


class RFormat(Record, frozen=True):
    pass_: Count = msgspec.field(name="pass")
    fail: Count
    pass_rate: Rate


class RExit(Record, frozen=True):
    """Trajectories by r_exit: its value, or where null its reason."""

    on_time: Count
    early: Count
    late: Count
    no_evidence: Count
    aborted: Count
    no_exit_gate: Count


class ByReason(Record, frozen=True):
    budget: Count
    request_failed: Count


class AbortedCounts(Record, frozen=True):
    trajectories: Count
    by_reason: ByReason
    without_turns: Count


class Parsed(Record, frozen=True):
    turns: Count
    unparsed: Count
    rate: Rate


class Reasks(Record, frozen=True):
    turns: Count
    asks: Count


class NullReasons(Record, frozen=True):
    single_sample: Count
    zero_variance: Count


class Advantages(Record, frozen=True):
    alpha: Weight
    return_weights: ReturnWeights
    groups: Count
    turns_with_advantage: Count
    turns_without_advantage: Count
    null_traj: NullReasons
    null_turn: NullReasons


class Inputs(Record, frozen=True):
    data_source: str
    ability: str
    log: str
    log_sha256: Sha256
    labels: str
    labels_sha256: Sha256
    kappa: Number
    kappa_n: int
    min_kappa: Number
    t_last_evidence_over: Literal["recorded turns", "session chunks"]


class CorpusSummary(Record, frozen=True):
    """The counts of one export; no timestamps."""

    trajectories: Count
    trajectories_in_log: Count
    levels: Levels
    turns: Count
    r_update: RUpdate
    r_format: RFormat
    r_exit: RExit
    t_last_evidence: dict[TurnKey, Count]
    no_evidence: Count
    aborted: AbortedCounts
    parsed: Parsed
    reasks: Reasks
    advantages: Advantages
    inputs: Inputs
