"""The response record (workflow/schemas/response.schema.yaml): one line per ask of
`responses/<shard>.jsonl`, or the abort line ending a trajectory; and the recorded
request and HTTP attempt, which the log and the response cache hold too."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

import msgspec

from grumem.records.base import ABSENT, Absent, Count, Number, Positive, Record, Sha256

__all__ = ["AbortRecord", "Attempt", "ExchangeRecord", "Request", "ResponseRecord"]


class Request(Record, frozen=True):
    """The exact request body POSTed, and its sha256."""

    body: str
    sha256: str


class Attempt(Record, frozen=True, kw_only=True):
    """One HTTP attempt: the raw body stored losslessly (`body_b64` when not UTF-8), the
    sha256 of its raw bytes, and the endpoint it went to (absent in older records)."""

    attempt: Positive
    status: int | None
    body: str | None
    body_b64: str | Absent = ABSENT
    sha256: str | None
    latency_s: Number
    error: str | None
    endpoint: str | Absent = ABSENT


class ExchangeRecord(Record, frozen=True, kw_only=True, tag_field="kind", tag="exchange"):
    """One ask: its request, its last attempt (`response`) and every attempt."""

    trajectory_id: str
    t: Positive
    ask: Count
    chunk_sha: Sha256
    memory_before: str | None
    request: Request
    response: Attempt
    attempts: Annotated[list[Attempt], msgspec.Meta(min_length=1)]
    response_model: str | None | Absent = ABSENT


class AbortRecord(Record, frozen=True, tag_field="kind", tag="abort"):
    """The end of a trajectory that was cut short, and why."""

    trajectory_id: str
    t: Positive
    chunk_sha: str
    reason: Literal["budget", "request_failed"]
    component: str | None
    detail: str


# a line of a responses file: which one, its `kind` says
ResponseRecord: TypeAlias = ExchangeRecord | AbortRecord
