"""The log line (workflow/schemas/log.schema.yaml): one turn of `log.jsonl`, the
boundary the export reads. A turn's request and response are its last ask's; the
asks before it (re-asks after a parse failure) are its `earlier_asks`."""

from __future__ import annotations

from typing import Literal

from grumem.records.base import ABSENT, Absent, Count, Positive, Record, Sha256
from grumem.records.gate import ParseFailure
from grumem.records.response import Attempt, Request

__all__ = ["Abort", "EarlierAsk", "LogLine"]


class Abort(Record, frozen=True):
    """Why a trajectory ended at this turn (budget: nothing was sent)."""

    reason: Literal["budget", "request_failed"]
    component: str | None
    detail: str


class EarlierAsk(Record, frozen=True):
    """An ask of a turn before its last: a recorded exchange the loop did not act on."""

    ask: Count
    request: Request
    response: Attempt
    content: str | None
    finish_reason: str | None
    parsed: bool
    parse_error: ParseFailure | None


class LogLine(Record, frozen=True, kw_only=True):
    """One turn, in the order `grumem log` writes its keys."""

    trajectory_id: str
    project: str
    query_id: str
    session: str
    sample: Count
    level: Literal["L1", "L2"]
    model: str
    # the model the answer names; absent from logs written before it was recorded
    response_model: str | None | Absent = ABSENT
    t: Positive
    chunk_sha: Sha256
    status: Literal["ok", "aborted"]
    abort: Abort | None
    asks: Count
    earlier_asks: list[EarlierAsk]
    memory_before: str | None
    memory_after: str | None
    request: Request | None
    response: Attempt | None
    content: str | None
    finish_reason: str | None
    parsed: bool
    update_gate: bool | None
    exit_gate: bool | None
    candidate: str | None
    think: str | None
    parse_error: ParseFailure | None
