"""A corpus trajectory checked against workflow/schemas/trajectory.schema.yaml in C
(msgspec.convert into typed structs mirroring it, plus the enums msgspec cannot
type), for every trajectory the export writes.

The structs may be stricter than the schema, never looser (tests check): a
record they refuse is re-checked by the compiled schema, which accepts it or
names the field. The compiled schema alone took ~1 ms a 20-turn trajectory.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

__all__ = ["fast_check"]

Count = Annotated[int, msgspec.Meta(ge=0)]
Turn_t = Annotated[int, msgspec.Meta(ge=1)]
Sha = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
# a JSON number (msgspec would turn an int into a float; the record is not changed)
Number = int | float


class _Strict(msgspec.Struct, forbid_unknown_fields=True):
    pass


class Message(_Strict):
    role: str
    content: str


class EarlierAsk(_Strict):
    ask: Count
    request_sha256: str
    response: str | None
    parsed: bool  # the schema's const false: checked below
    parse_error: dict[str, Any] | None


class Turn(_Strict):
    t: Turn_t
    prompt: Annotated[list[Message], msgspec.Meta(min_length=1)]
    response: str | None
    r_update: Literal[1, -1]
    parsed: bool
    chunk_sha: Sha
    label: bool
    update_gate: bool | None
    exit_gate: bool | None
    attempt: Turn_t
    asks: Count
    earlier_asks: list[EarlierAsk]
    request_sha256: str
    response_model: str | None
    advantage: Number | None
    advantage_traj: Number | None
    advantage_turn: Number | None


class Aborted(_Strict):
    t: Turn_t
    reason: Literal["budget", "request_failed"]
    component: str | None


class Trajectory(_Strict):
    trajectory_id: str
    turns: Annotated[list[Turn], msgspec.Meta(min_length=1)]
    r_exit: Number | None  # one of the schema's enum: checked below
    r_exit_reason: Literal["no_evidence", "aborted", "no_exit_gate"] | None
    r_format: Literal[0, 1]
    r_outcome: None
    t_exit: Turn_t | None
    t_last_evidence: Turn_t | None
    project: str
    query_id: str
    session: str
    sample: Count
    level: Literal["L1", "L2"]
    model: str
    aborted: Aborted | None


R_EXIT = (0, -0.75, -0.5)


def fast_check(record: dict[str, Any]) -> bool:
    """True when the structs accept the record (then the schema does); False when the
    caller must ask the compiled schema."""
    try:
        traj = msgspec.convert(record, Trajectory, strict=True)
    except msgspec.ValidationError:
        return False
    if traj.r_exit is not None and (type(traj.r_exit) is bool or traj.r_exit not in R_EXIT):
        return False
    return not any(a.parsed for turn in traj.turns for a in turn.earlier_asks)
