"""A row of corpus/sessions.parquet (workflow/schemas/session-row.schema.yaml), typed.

One (project, query, session): what an online rollout of the GRU-Mem loop needs.
The classes mirror the schema field for field, in its property order (the order
the export writes the columns): a required property is a field without a
default, a nullable one has None in its type, an enum or const is a Literal,
minimum, minLength, minItems and pattern are msgspec.Meta constraints; `integer`
is int, `number` is int | float. Every object of the schema is closed, so every
class refuses unknown fields. tests/records/test_session_row_record.py holds the
classes against the schema.

This module imports only msgspec, the standard library and grumem.errors.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any, Literal

import msgspec

from grumem.errors import SessionRowError

__all__ = [
    "AGENT_NAME",
    "ChunkText",
    "ReturnWeightsRecord",
    "RowBudget",
    "RowMessage",
    "RowRewardModel",
    "SessionInfo",
    "SessionRowRecord",
]

AGENT_NAME = "grumem"  # the agent loop's registered name (grumem.verl.agent_loop)

Count = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
Sha256 = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}\Z")]
Number = int | float
_UNIT = msgspec.Meta(ge=0, le=1)
Fraction = Annotated[int, _UNIT] | Annotated[float, _UNIT]  # a number in [0, 1]


class _Closed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


class RowMessage(_Closed, frozen=True):
    """The question as verl's dataset reads a prompt: one user message."""

    role: Literal["user"]
    content: str


class RowRewardModel(_Closed, frozen=True):
    """verl's reward field: the evidence label of each chunk, in chunk order."""

    style: Literal["rule"]
    ground_truth: Annotated[list[Literal["yes", "no"]], msgspec.Meta(min_length=1)]


class ChunkText(_Closed, frozen=True):
    """A chunk rendered exactly as the prompts stage fills `{chunk}`, and its sha256."""

    text: str
    chunk_sha: Sha256


class RowBudget(_Closed, frozen=True):
    """The run's token budget (config `budget`, cl100k tokens)."""

    context: Positive
    question: Positive
    memory: Positive
    section: Positive
    response: Positive


class ReturnWeightsRecord(_Closed, frozen=True):
    """The weights of a trajectory's return R_i (export.return_weights)."""

    r_update: Number
    r_exit: Number
    r_format: Number


class SessionInfo(_Closed, frozen=True):
    """What grumem's agent loop reads of the row (verl passes it as `extra_info`)."""

    index: Count
    split: str
    project: NonEmpty
    query_id: NonEmpty
    session: NonEmpty
    question: str
    system: str | None
    level: Literal["L1", "L2"]
    chunks: Annotated[list[ChunkText], msgspec.Meta(min_length=1)]
    t_last_evidence: Positive | None
    budget: RowBudget
    template_sha256: Sha256
    alpha: Fraction
    return_weights: ReturnWeightsRecord


class SessionRowRecord(_Closed, frozen=True):
    """One row of sessions.parquet."""

    data_source: NonEmpty
    agent_name: Literal["grumem"]
    prompt: Annotated[list[RowMessage], msgspec.Meta(min_length=1, max_length=1)]
    ability: str
    reward_model: RowRewardModel
    extra_info: SessionInfo

    @classmethod
    def convert(cls, value: Any, where: str = "sessions row") -> SessionRowRecord:
        """The record of a JSON-shaped value (dicts, lists, str, numbers), checked as the
        schema; a SessionRowError naming `where` and the field if it is not one."""
        try:
            return msgspec.convert(value, cls, strict=True)
        except msgspec.ValidationError as e:
            raise SessionRowError(f"{where}: {_located(str(e))}") from None

    def to_dict(self) -> dict[str, Any]:
        """The row as the JSON value (and the parquet row) the export writes."""
        return typing.cast(dict[str, Any], msgspec.to_builtins(self))


_AT = re.compile(r"^(?P<why>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


def _located(message: str) -> str:
    """msgspec's `Expected int, got str - at `$.extra_info.chunks[0].t`` as the schema's
    errors name a field: `field 'extra_info.chunks.0.t': expected int, got str`."""
    m = _AT.match(message)
    assert m is not None  # the pattern matches any text
    why, path = m["why"], m["path"] or ""
    field = ".".join(p for p in re.split(r"[.\[\]]", path) if p)
    why = why[:1].lower() + why[1:]
    return f"field '{field}': {why}" if field else why
