"""A project's session index: {session, file, line} per session, one line each.

Shards are planned and paid for independently, so a session copied into two
chunk files of different shards would be sent twice and found only at export.
The `sessions` stage builds the index once per project over every chunk file
(failing on a copy, naming both files); each `prompts` job checks its shard's
sessions against it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence

from grumem.core.json_text import stdlib_loads
from grumem.errors import GrumemError, RecordError
from grumem.io.chunk_files import expand_chunk_paths
from grumem.io.typed import read_records
from grumem.records.session_index import SessionIndexEntry


def session_index(chunk_paths: Sequence[str | os.PathLike[str]]) -> Iterator[SessionIndexEntry]:
    """{session, file, line} per session; a session in two files is an error naming both.

    Only the `session` of each line is read: a malformed line is left to the
    prompts job of its shard, which names its file, line and field."""
    seen: dict[str, tuple[str, int]] = {}
    for path in expand_chunk_paths(chunk_paths):
        for line, session in _sessions_in(path):
            if session not in seen:
                seen[session] = (path, line)
                yield SessionIndexEntry(session=session, file=path, line=line)
            elif seen[session][0] != path:
                first, first_line = seen[session]
                raise RecordError(
                    path,
                    line,
                    "session",
                    f"session {session!r} is also in {first} (line {first_line}): "
                    "a session must be in one chunk file of its project (remove the copy)",
                )


def _sessions_in(path: str) -> Iterator[tuple[int, str]]:
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as e:
        raise GrumemError(f"{path}: cannot read the chunk file: {e.strerror}") from None
    with f:
        for lineno, raw in enumerate(f, start=1):
            try:
                record = stdlib_loads(raw)
            except ValueError:  # bad JSON or not UTF-8: the prompts job says which
                continue
            if isinstance(record, dict) and isinstance(record.get("session"), str):
                yield lineno, record["session"]


def read_session_index(path: str | os.PathLike[str]) -> dict[str, str]:
    """session -> the chunk file that holds it (every prompts job reads the whole
    index: its lines are decoded and checked in one C pass)."""
    return {r.session: r.file for _, r in read_records(path, SessionIndexEntry)}


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
