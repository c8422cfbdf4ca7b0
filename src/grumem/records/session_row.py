"""A row of corpus/sessions.parquet (workflow/schemas/session-row.schema.yaml): one
(project, query, session), what an online rollout of the loop needs. The export
builds it, verl's dataset hands its columns to the `grumem` agent loop."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

import msgspec

from grumem.records.base import Count, NonEmpty, Number, Positive, Record, Sha256

__all__ = [
    "Budget",
    "ChatMessage",
    "ReturnWeights",
    "RewardModel",
    "SessionChunk",
    "SessionInfo",
    "SessionRow",
]

Alpha: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=0, le=1)] | Annotated[float, msgspec.Meta(ge=0, le=1)]
)


class ChatMessage(Record, frozen=True):
    """The question as the one user message verl's dataset filters read."""

    role: Literal["user"]
    content: str


class RewardModel(Record, frozen=True):
    """The evidence label of chunks[i], one per chunk, as turns.parquet encodes it."""

    style: Literal["rule"]
    ground_truth: Annotated[list[Literal["yes", "no"]], msgspec.Meta(min_length=1)]


class SessionChunk(Record, frozen=True):
    """A section text exactly as it fills `{chunk}`, and the sha256 of its UTF-8 bytes."""

    text: str
    chunk_sha: Sha256


class Budget(Record, frozen=True):
    """The run's token budget (config `budget`, cl100k tokens)."""

    context: Positive
    question: Positive
    memory: Positive
    section: Positive
    response: Positive


class ReturnWeights(Record, frozen=True):
    r_update: Number
    r_exit: Number
    r_format: Number


class SessionInfo(Record, frozen=True):
    index: Count
    split: str
    project: NonEmpty
    query_id: NonEmpty
    session: NonEmpty
    question: str
    system: str | None
    level: Literal["L1", "L2"]
    chunks: Annotated[list[SessionChunk], msgspec.Meta(min_length=1)]
    t_last_evidence: Positive | None
    budget: Budget
    template_sha256: Sha256
    alpha: Alpha
    return_weights: ReturnWeights


class SessionRow(Record, frozen=True):
    data_source: NonEmpty
    agent_name: Literal["grumem"]
    prompt: Annotated[list[ChatMessage], msgspec.Meta(min_length=1, max_length=1)]
    ability: str
    reward_model: RewardModel
    extra_info: SessionInfo
