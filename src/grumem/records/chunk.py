"""Chunks (workflow/schemas/chunk.schema.yaml): one line of a chunk file, a session's
piece that one turn reads; and the chunk manifest of a shard
(chunk-manifest.schema.yaml), the `chunk` rule's declared output."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from grumem.records.base import ABSENT, Absent, Count, JsonObject, NonEmpty, Record

__all__ = [
    "ChunkLine",
    "ChunkManifest",
    "ManifestTranscript",
    "Part",
    "Redaction",
    "TranscriptRecord",
]


class Part(Record, frozen=True, forbid_unknown_fields=False):
    """Which piece of a record cut to fit the section budget this is (index of `of`)."""

    index: Count
    of: Annotated[int, msgspec.Meta(ge=2)]


class TranscriptRecord(Record, frozen=True, forbid_unknown_fields=False, kw_only=True):
    """One transcript record of a chunk; only role and text are rendered. An open
    object: a record may carry fields of its own, read past here."""

    role: Literal["user", "assistant", "tool_result", "system"]
    text: str
    source: JsonObject | Absent = ABSENT  # a pointer to where the record came from
    part: Part | Absent = ABSENT


class ChunkLine(Record, frozen=True, forbid_unknown_fields=False):
    """A chunk: `index` counts from 0 in session order, the turn that reads it is
    t = index + 1. An open object, like its records."""

    session: NonEmpty
    index: Count
    records: Annotated[list[TranscriptRecord], msgspec.Meta(min_length=1)]


Kind = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9-]*\Z")]


class ManifestTranscript(Record, frozen=True):
    """One transcript of the shard: the directory of its chunk files, those files, and
    the secrets redacted from its records, counted by kind."""

    transcript: NonEmpty
    directory: NonEmpty
    chunks: list[NonEmpty]
    redacted: dict[Kind, Annotated[int, msgspec.Meta(ge=1)]]


class Redaction(Record, frozen=True):
    """The detector that redacted the records: its package, version and grumem's patterns."""

    detector: NonEmpty
    version: NonEmpty
    patterns: Annotated[int, msgspec.Meta(ge=1)]


class ChunkManifest(Record, frozen=True):
    """results/<project>/chunked/<shard>.json: what a `chunk` job wrote, and how its
    records were redacted (None: they were not)."""

    transcripts: list[ManifestTranscript]
    redaction: Redaction | None
