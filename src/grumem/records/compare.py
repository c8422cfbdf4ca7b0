"""compare.json (workflow/schemas/compare.schema.yaml): policies measured from their turn
logs against the evidence labels, and compared two by two on the keys both ran."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

import msgspec

from grumem.records.base import Count, Number, Positive, Record, Sha256

__all__ = [
    "CompareResult",
    "Estimate",
    "MemoryAtT",
    "Pair",
    "PairFigure",
    "PairFigures",
    "PolicyFigures",
    "Settings",
]

PolicyName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")]
TurnKey = Annotated[str, msgspec.Meta(pattern=r"^[1-9][0-9]*\Z")]
OffsetKey = Annotated[str, msgspec.Meta(pattern=r"^(0|-?[1-9][0-9]*)\Z")]
NonNegative: TypeAlias = Annotated[int, msgspec.Meta(ge=0)] | Annotated[float, msgspec.Meta(ge=0)]
Probability: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=0, le=1)] | Annotated[float, msgspec.Meta(ge=0, le=1)]
)
Confidence: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=0, lt=1)] | Annotated[float, msgspec.Meta(ge=0, lt=1)]
)
Interval = Annotated[list[Number], msgspec.Meta(min_length=2, max_length=2)]


class Estimate(Record, frozen=True):
    """value = numerator / denominator, with its confidence interval and how it was found."""

    value: Number | None
    ci: Interval | None
    numerator: Number
    denominator: NonNegative
    method: Literal["wilson", "bootstrap"]


class MemoryAtT(Record, frozen=True):
    """The memory's tokens after the turns answered at one t."""

    turns: Positive
    mean: NonNegative
    median: NonNegative
    max: Count


class Levels(Record, frozen=True):
    L1: Count
    L2: Count


class Exit(Record, frozen=True):
    """Trajectories by exit, over all trajectories."""

    on_time: Estimate
    early: Estimate
    late: Estimate
    no_evidence: Estimate
    no_decision: Estimate


class NoDecision(Record, frozen=True):
    aborted: Count
    no_exit_gate: Count


class ExitOffset(Record, frozen=True):
    histogram: dict[OffsetKey, Count]
    mean: Estimate


class PolicyFigures(Record, frozen=True):
    """One policy's figures, from one turn log."""

    log: str
    log_sha256: Sha256
    models: list[str]
    levels: Levels
    trajectories: Count
    aborted: Count
    turns: Count
    asks: Count
    parse_rate: Estimate
    asks_parse_rate: Estimate
    update_agreement: Estimate
    update_agreement_parsed: Estimate
    update_precision: Estimate
    update_recall: Estimate
    exit: Exit
    exit_no_decision: NoDecision
    exit_offset: ExitOffset
    chunks_read_mean: Estimate
    chunks_total_mean: Estimate
    speedup: Estimate
    memory_tokens_by_t: dict[TurnKey, MemoryAtT]
    latency_s_per_trajectory: Estimate
    latency_s_per_turn: Estimate
    completion_tokens_per_trajectory: Estimate | None
    prompt_tokens_per_trajectory: Estimate | None


class PairFigure(Record, frozen=True):
    """One figure of two policies on the keys both ran; difference = value_a - value_b."""

    better: Literal["higher", "lower"]
    value_a: Number | None
    value_b: Number | None
    difference: Number | None
    ci: Interval | None
    wins_a: Count
    wins_b: Count
    ties: Count
    beyond_noise: bool
    winner: PolicyName | None
    p_value: Probability | None


class PairFigures(Record, frozen=True):
    parse_rate: PairFigure
    update_agreement: PairFigure
    update_precision: PairFigure
    update_recall: PairFigure
    exit_on_time: PairFigure
    chunks_read_mean: PairFigure
    speedup: PairFigure
    latency_s_per_trajectory: PairFigure


class Pair(Record, frozen=True):
    a: PolicyName
    b: PolicyName
    keys: Count
    groups: Count
    only_a: Count
    only_b: Count
    figures: PairFigures


class Settings(Record, frozen=True):
    confidence: Confidence
    resamples: Positive
    seed: Count
    labels: str
    labels_sha256: Sha256
    sessions: Count


class CompareResult(Record, frozen=True):
    """compare.json: the policies by name (sorted), their pairs, how the intervals were made."""

    policies: dict[PolicyName, PolicyFigures]
    pairs: list[Pair]
    settings: Settings
