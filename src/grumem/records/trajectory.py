"""The corpus trajectory (workflow/schemas/trajectory.schema.yaml): one line
of `corpus/trajectories.jsonl`, a run's trainable turns with their rewards."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from grumem.records.base import Count, Number, Positive, Record, Sha256, SplitName
from grumem.records.gate import ParseFailure

__all__ = ["R_EXIT", "Aborted", "Message", "Trajectory", "TrajectoryTurn", "TrajectoryEarlierAsk"]

R_EXIT = (0, -0.75, -0.5)  # the values r_exit takes (a float enum: no Literal holds one)


class Message(Record, frozen=True):
    """A chat message of the recorded request."""

    role: str
    content: str


class TrajectoryEarlierAsk(Record, frozen=True):
    """An ask before the turn's last, as the corpus keeps it (each makes r_format 0)."""

    ask: Count
    request_sha256: str
    response: str | None
    parsed: Literal[False]
    parse_error: ParseFailure | None


class TrajectoryTurn(Record, frozen=True):
    """One trainable turn: the recorded prompt and response, the gates and rewards."""

    t: Positive
    prompt: Annotated[list[Message], msgspec.Meta(min_length=1)]
    response: str | None
    r_update: Literal[1, -1]
    parsed: bool
    chunk_sha: Sha256
    label: bool
    update_gate: bool | None
    exit_gate: bool | None
    attempt: Positive
    asks: Count
    earlier_asks: list[TrajectoryEarlierAsk]
    request_sha256: str
    response_model: str | None
    advantage: Number | None
    advantage_traj: Number | None
    advantage_turn: Number | None


class Aborted(Record, frozen=True):
    """Where and why a trajectory was cut short (its abort line is not a turn)."""

    t: Positive
    reason: Literal["budget", "request_failed"]
    component: str | None


class Trajectory(Record, frozen=True):
    """One trajectory, in the export's key order."""

    trajectory_id: str
    turns: Annotated[list[TrajectoryTurn], msgspec.Meta(min_length=1)]
    r_exit: Number | None
    r_exit_reason: Literal["no_evidence", "aborted", "no_exit_gate"] | None
    r_format: Literal[0, 1]
    r_outcome: None
    t_exit: Positive | None
    t_last_evidence: Positive | None
    project: str
    query_id: str
    session: str
    sample: Count
    level: Literal["L1", "L2"]
    model: str
    split: SplitName
    aborted: Aborted | None

    def __post_init__(self) -> None:
        if self.r_exit is not None and self.r_exit not in R_EXIT:
            raise ValueError(f"r_exit is {self.r_exit!r}, not one of {R_EXIT} or null")
