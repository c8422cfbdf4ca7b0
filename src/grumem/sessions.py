"""The `sessions` stage: one project's session index, made before any prompt.

Shards are planned and paid for independently, so a session copied into two
chunk files of different shards would be sent twice and found only at export.
The index is built once per project over every chunk file; it fails naming
both files, and each `prompts` job checks its shard's sessions against it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence

from grumem.chunks import iter_sessions
from grumem.errors import GrumemError
from grumem.records import read_jsonl


def session_index(chunk_paths: Sequence[str | os.PathLike[str]]) -> Iterator[dict]:
    """{session, file, line} per session; a session in two files is an error naming both."""
    for session, chunks in iter_sessions(chunk_paths):
        yield {"session": session, "file": chunks[0].path, "line": chunks[0].line}


def read_session_index(path: str | os.PathLike[str]) -> dict[str, str]:
    """session -> the chunk file that holds it."""
    return {r["session"]: r["file"] for r in read_jsonl(path, "session")}


def check_session(
    index: Mapping[str, str], index_path: str, session: str, file: str, line: int
) -> None:
    """The session read from `file` is the project's only copy of it."""
    other = index.get(session)
    if other is None:
        raise GrumemError(
            f"{file}:{line}: session {session!r} is not in the project's session index "
            f"{index_path}: rebuild it (snakemake reruns `sessions` when chunk files change)"
        )
    if os.path.normpath(other) != os.path.normpath(file):
        raise GrumemError(
            f"{file}:{line}: session {session!r} is also in {other}: a session must be in "
            "one chunk file of its project (remove the copy)"
        )
