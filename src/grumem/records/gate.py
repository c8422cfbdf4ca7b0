"""The gate record (workflow/schemas/gate.schema.yaml): the strict offline re-parse of
one recorded ask; and the parse failure it records, which the log and corpus keep."""

from __future__ import annotations

from typing import Literal

from grumem.records.base import Count, Positive, Record

__all__ = ["GateRecord", "ParseFailure"]


class ParseFailure(Record, frozen=True):
    """Why an answer did not parse: the failing tag, the reason, the answer (truncated)."""

    tag: Literal["think", "check", "update", "next", "response"]
    reason: str
    raw: str


class GateRecord(Record, frozen=True):
    """The gates of one ask, or nulls and the parse failure: no gate is ever defaulted."""

    trajectory_id: str
    t: Positive
    ask: Count
    parsed: bool
    update_gate: bool | None
    exit_gate: bool | None
    candidate: str | None
    think: str | None
    content: str | None
    finish_reason: str | None
    parse_error: ParseFailure | None
    memory_after: str | None

    def __post_init__(self) -> None:
        # the schema's if/then: parsed, every gate field set and no error; else the reverse
        fields = (self.update_gate, self.exit_gate, self.candidate, self.think)
        if self.parsed:
            if any(v is None for v in fields) or self.parse_error is not None:
                raise ValueError(
                    "parsed is true: the gates, candidate and think are set and parse_error is null"
                )
        elif any(v is not None for v in fields) or self.parse_error is None:
            raise ValueError(
                "parsed is false: the gates, candidate and think are null and parse_error is set"
            )
