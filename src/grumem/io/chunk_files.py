"""Chunk files and manifests: reading and validating them (a chunk's rendering is
grumem.core.chunk_text's)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from grumem.core.chunk_text import Chunk
from grumem.core.json_text import loads
from grumem.errors import NestingError, RecordError
from grumem.io.jsonl import open_input
from grumem.io.typed import checked_document, read_checked
from grumem.records.chunk import ChunkLine, ChunkManifest


def read_chunk_file(path: str | os.PathLike[str]) -> list[Chunk]:
    """All chunks of one file, checked: schema, one session per index, indices 0..n-1.

    A file may hold several sessions (a transcript with sidechains); each
    session's chunks must be in order and complete.
    """
    path = str(path)
    with open_input(path) as f:  # a missing file or a directory: an error naming it
        empty = not f.read(1)
    if empty:
        raise RecordError(path, None, None, "empty chunk file: no chunks to read")
    chunks: list[Chunk] = []
    next_index: dict[str, int] = {}
    for line, rec in read_checked(path, ChunkLine):
        expected = next_index.get(rec["session"], 0)
        if rec["index"] != expected:
            raise RecordError(
                path,
                line,
                "index",
                f"session {rec['session']!r} expects chunk {expected}, found {rec['index']}",
            )
        next_index[rec["session"]] = expected + 1
        chunks.append(Chunk(rec["session"], rec["index"], tuple(rec["records"]), path, line))
    return chunks


def manifest_chunks(path: str | os.PathLike[str]) -> list[str]:
    """The chunk files a `grumem chunk --manifest` file lists: per transcript, in
    the manifest's order, its chunk files sorted (as its directory would give them)."""
    with open_input(path) as f:
        try:
            document = loads(f.read(), path, locate=True)
        except NestingError:
            raise
        except ValueError as e:
            raise RecordError(path, None, None, f"not JSON: {e}") from None
    manifest = checked_document(document, ChunkManifest, path)
    return [c for t in manifest.transcripts for c in sorted(t.chunks)]


def expand_chunk_paths(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Files as given; a directory stands for the *.jsonl files in it, sorted; a
    `.json` file is a chunk manifest and stands for the chunk files it lists (the
    workflow passes a shard's manifest, not its thousands of paths)."""
    out: list[str] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(str(f) for f in sorted(p.glob("*.jsonl")))
        elif p.suffix == ".json":
            out.extend(manifest_chunks(p))
        else:
            out.append(str(p))
    return out


def iter_sessions(paths: Sequence[str | os.PathLike[str]]) -> Iterator[tuple[str, list[Chunk]]]:
    """(session, chunks) over chunk files; a session split across files is an error."""
    seen: dict[str, str] = {}
    for path in expand_chunk_paths(paths):
        by_session: dict[str, list[Chunk]] = {}
        for c in read_chunk_file(path):
            by_session.setdefault(c.session, []).append(c)
        for session, chunks in by_session.items():
            if session in seen:
                raise RecordError(
                    path,
                    chunks[0].line,
                    "session",
                    f"session {session!r} also appears in {seen[session]}",
                )
            seen[session] = path
            yield session, chunks
