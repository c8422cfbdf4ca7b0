"""A row of corpus/sessions.parquet (workflow/schemas/rollout-row.schema.yaml): one
(project, query, session), what an online rollout of the GRU-Mem loop needs. The
export builds it (grumem.core.rollout_row), verl's dataset hands its columns to
the `grumem` agent loop (grumem.verl.rollout reads them back as this record). The
classes mirror the schema field for field, in its property order (the order the
export writes the columns); tests/records/test_rollout_row_record.py holds them
against the schema.

What the loop reads of a row is read off the record itself (`chunks`, `where`):
one class from the export to the agent loop. The checks that need more than the
record's shape (each chunk's sha256, the labels against t_last_evidence) are
grumem.core.rollout_row.checked_row's."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple, Self, TypeAlias

import msgspec

from grumem.errors import RecordShapeError, RolloutRowError
from grumem.records.base import Count, NonEmpty, Positive, Record, Sha256, SplitName
from grumem.records.return_weights import ReturnWeights

__all__ = [
    "AGENT_NAME",
    "EVIDENCE",
    "LABELS",
    "ChunkText",
    "RowBudget",
    "RowMessage",
    "RowRewardModel",
    "RolloutInfo",
    "RolloutRow",
    "RowChunk",
]

AGENT_NAME = "grumem"  # the agent loop's registered name (grumem.verl.agent_loop)
LABELS = {True: "yes", False: "no"}  # a label as ground_truth and turns.parquet write it
EVIDENCE = {"yes": True, "no": False}

_UNIT = msgspec.Meta(ge=0, le=1)
Fraction: TypeAlias = Annotated[int, _UNIT] | Annotated[float, _UNIT]  # a number in [0, 1]


class RowMessage(Record, frozen=True):
    """The question as verl's dataset reads a prompt: one user message."""

    role: Literal["user"]
    content: str


class RowRewardModel(Record, frozen=True):
    """verl's reward field: the evidence label of each chunk, in chunk order."""

    style: Literal["rule"]
    ground_truth: Annotated[list[Literal["yes", "no"]], msgspec.Meta(min_length=1)]


class ChunkText(Record, frozen=True):
    """A chunk rendered exactly as the prompts stage fills `{chunk}`, and its sha256."""

    text: str
    chunk_sha: Sha256


class RowBudget(Record, frozen=True):
    """The run's token budget (config `budget`, cl100k tokens)."""

    context: Positive
    question: Positive
    memory: Positive
    section: Positive
    response: Positive


class RolloutInfo(Record, frozen=True):
    """What grumem's agent loop reads of the row (verl passes it as `extra_info`)."""

    index: Count
    split: SplitName
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
    return_weights: ReturnWeights
    turn_weighting: Literal["row", "trajectory"]  # how Â_turn is normalised (core.advantages)


class RowChunk(NamedTuple):
    """Chunk t of a row with its evidence label: what turn t of a rollout reads."""

    t: int
    text: str
    chunk_sha: str
    evidence: bool


class RolloutRow(Record, frozen=True):
    """One row of sessions.parquet."""

    data_source: NonEmpty
    agent_name: Literal["grumem"]
    prompt: Annotated[list[RowMessage], msgspec.Meta(min_length=1, max_length=1)]
    ability: str
    reward_model: RowRewardModel
    extra_info: RolloutInfo

    @classmethod
    def convert(cls, value: Any, where: str = "sessions row") -> Self:
        """The record of a JSON-shaped value (dicts, lists, str, numbers), checked as the
        schema; a RolloutRowError naming `where` and the field if it is not one."""
        try:
            return super().convert(value)
        except RecordShapeError as e:
            at = f"field '{e.field}': " if e.field else ""
            raise RolloutRowError(f"{where}: {at}{e.why}") from None

    @property
    def where(self) -> str:
        """The row, as an error message names it."""
        info = self.extra_info
        return f"sessions row {info.index} ({info.project}/{info.query_id}/{info.session})"

    @property
    def chunks(self) -> tuple[RowChunk, ...]:
        """The session's chunks in order, t from 1, each with its label (ground_truth
        holds one a chunk: grumem.core.rollout_row.checked_row checks that)."""
        labels = self.reward_model.ground_truth
        return tuple(
            RowChunk(t, c.text, c.chunk_sha, EVIDENCE[label])
            for t, (c, label) in enumerate(zip(self.extra_info.chunks, labels, strict=False), 1)
        )
