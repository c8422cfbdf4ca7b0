"""The session index entry (workflow/schemas/session-index.schema.yaml): one line of
`sessions.jsonl`, the chunk file that holds a session."""

from __future__ import annotations

from grumem.records.base import Positive, Record

__all__ = ["SessionIndexEntry"]


class SessionIndexEntry(Record, frozen=True):
    """A session, its chunk file (as the workflow names it) and its first chunk's line."""

    session: str
    file: str
    line: Positive
