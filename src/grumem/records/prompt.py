"""The prompt record (workflow/schemas/prompt.schema.yaml): one (trajectory, t) of
`prompts/<shard>.jsonl`, question and section filled, the memory slot open."""

from __future__ import annotations

from grumem.records.base import Count, Positive, Record, Sha256

__all__ = ["PromptRecord", "TokenCounts"]


class TokenCounts(Record, frozen=True, forbid_unknown_fields=False):
    """Token counts of the prompt's parts (an open object: other keys are read past)."""

    question: int
    section: int
    fixed: int


class PromptRecord(Record, frozen=True):
    """The user message of turn t is prefix + memory + suffix."""

    trajectory_id: str
    project: str
    query_id: str
    session: str
    sample: Count
    t: Positive
    chunk_sha: Sha256
    chunk_file: str
    chunk_line: Positive
    system: str | None
    prefix: str
    suffix: str
    tokens: TokenCounts
