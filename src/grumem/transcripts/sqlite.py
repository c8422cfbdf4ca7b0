"""SQLite transcript stores, read without touching them and never half read.

Several agents keep their sessions in a SQLite database the running tool writes
to (Cursor's `state.vscdb`, OpenCode's `opencode.db`, Goose's `sessions.db`,
Zed's `threads.db`). Every format that reads one goes through `read_snapshot`:

- The file is opened read-only and immutable (`file:...?mode=ro&immutable=1`):
  SQLite then takes no lock and writes nothing beside it (no `-shm`, no
  journal), so an editor that has the database open is never blocked or changed.
- Immutable, SQLite ignores a `-wal` file, and a database in WAL mode keeps its
  newest transactions there until a checkpoint: read alone, the main file is a
  stale, possibly torn, view. When a non-empty `-wal` sits beside the database,
  both are copied into a private temporary directory and the copy is opened,
  where SQLite replays the log as it would for the tool itself.
- A non-empty `-journal` (a rollback-mode write under way) is never read past:
  the main file may hold half of that write.
- The files are looked at (size, modification time) before and after: a change
  in between means the tool wrote while grumem read, and the read (or the copy)
  is done again, up to ATTEMPTS times, then refused with an error naming the
  file. What a reader returns is always one consistent state of the database.

Readers get the connection and return plain Python values (they read every
row they need inside the call): nothing of a snapshot outlives it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from grumem.core import json_text
from grumem.errors import RecordError
from grumem.transcripts.base import Head, NotThisFormat

HEADER = b"SQLite format 3\x00"
ATTEMPTS = 3
RETRY_SECONDS = 0.2

T = TypeVar("T")
_FileState = tuple[tuple[int, int] | None, ...]


def is_sqlite(head: Head) -> bool:
    """The file starts with SQLite's 16-byte header (the head is read as UTF-8 with
    replacement; the header is ASCII and its NUL survives)."""
    return head.text.startswith(HEADER.decode("ascii"))


def not_sqlite() -> NotThisFormat:
    return NotThisFormat("not a SQLite database (no 'SQLite format 3' header)")


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _state(path: str) -> _FileState:
    return tuple(_stat(path + suffix) for suffix in ("", "-wal", "-journal"))


def _uri(path: str) -> str:
    return "file:" + quote(os.path.abspath(path)) + "?mode=ro&immutable=1"


def _busy(path: str, why: str) -> RecordError:
    return RecordError(
        path,
        None,
        None,
        f"{why}; grumem reads a database only in a state its tool finished writing: "
        "retry when the tool is idle (or closed), or give a copy of the database "
        "taken with `sqlite3 <file> .backup <copy>`",
    )


def read_snapshot(path: str | os.PathLike[str], reader: Callable[[sqlite3.Connection], T]) -> T:
    """reader(connection) on one consistent state of the database at `path` (see the
    module's docstring); a RecordError naming the file when none could be had."""
    path = str(path)
    why = ""
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(RETRY_SECONDS)
        before = _state(path)
        if before[0] is None:
            raise RecordError(path, None, None, "cannot read: no such file")
        journal, wal = before[2], before[1]
        if journal is not None and journal[0] > 0:
            why = "its rollback journal (-journal) shows a write under way"
            continue
        try:
            if wal is not None and wal[0] > 0:
                done = _read_copy(path, before, reader)
            else:
                with _connect(_uri(path), uri=True) as conn:
                    done = [reader(conn)]
                if _state(path) != before:
                    done = []
        except sqlite3.DatabaseError as e:
            if _state(path) == before:
                why = f"not a readable SQLite database: {e}"
                raise RecordError(path, None, None, why) from None
            done = []  # the file changed under the read: what failed may be that
        if done:
            return done[0]
        why = "it changed while being read"
    raise _busy(path, f"{why} ({ATTEMPTS} attempts)")


def _read_copy(path: str, before: _FileState, reader: Callable[[sqlite3.Connection], T]) -> list[T]:
    """The database and its write-ahead log copied side by side into a private
    directory and read there (SQLite replays the log into the copy, not the
    original): [result], or [] when the files changed while they were copied."""
    with tempfile.TemporaryDirectory(prefix="grumem-sqlite-") as tmp:
        copy = os.path.join(tmp, "snapshot.db")
        shutil.copyfile(path, copy)
        shutil.copyfile(path + "-wal", copy + "-wal")
        if _state(path) != before:
            return []  # written while copied: the two may not match
        with _connect(copy) as conn:
            conn.execute("PRAGMA query_only = ON")
            return [reader(conn)]


class _connect:
    """sqlite3.connect closed on exit (the stdlib's context manager only commits)."""

    def __init__(self, target: str, uri: bool = False):
        self.conn = sqlite3.connect(target, uri=uri)

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def count(path: str | os.PathLike[str], counter: Callable[[sqlite3.Connection], int]) -> int | None:
    """counter(connection) on the main file alone, for `grumem discover`'s count of a
    store's sessions; None when the file cannot be read as a SQLite database (then only
    its reader could tell).

    Read-only and immutable, as every read here, but never through a snapshot:
    discovery copies nothing, so the rows still in a `-wal` log (a tool writing right
    now) are not counted: the figure is the store's at its last checkpoint, and the
    chunk stage, which reads the log too, may find a few sessions more."""
    try:
        with _connect(_uri(str(path)), uri=True) as conn:
            return counter(conn)
    except sqlite3.DatabaseError:
        return None


def tables(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table's name and its columns."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n: {r[1] for r in conn.execute(f"PRAGMA table_info({quote_name(n)})")} for n in names}


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def schema(path: str | os.PathLike[str]) -> dict[str, set[str]] | None:
    """The tables of a SQLite file, for detection; None when it cannot be opened.

    The main file is looked at first (immutable, no copy: cheap even for a
    database of gigabytes); only a file whose main part holds no table yet (the
    tool created it and its schema is still in the log) is read through a
    snapshot."""
    path = str(path)
    try:
        with _connect(_uri(path), uri=True) as conn:
            found = tables(conn)
        if not found and (_stat(path + "-wal") or (0, 0))[0] > 0:
            found = read_snapshot(path, tables)
    except (sqlite3.DatabaseError, RecordError):
        return None
    return found


def has_tables(
    path: str | os.PathLike[str], head: Head, wanted: Mapping[str, Iterable[str]], tool: str
) -> bool | NotThisFormat:
    """A detector's check: a SQLite file holding every table of `wanted` with at
    least the given columns; else a refusal naming the first one missing."""
    if not is_sqlite(head):
        return not_sqlite()
    found = schema(path)
    if found is None:
        return NotThisFormat("a SQLite file that cannot be opened")
    for table, columns in wanted.items():
        if table not in found:
            return NotThisFormat(f"a SQLite database without {tool}'s table {table!r}")
        missing = sorted(set(columns) - found[table])
        if missing:
            return NotThisFormat(f"{tool}'s table {table!r} lacks {', '.join(missing)}")
    return True


def json_value(path: str, where: str, raw: Any) -> Any:
    """A JSON column's value (TEXT or BLOB), parsed; a RecordError naming the row
    (`where`, a table and key) when it is not JSON or nests too deep."""
    if raw is None:
        raise RecordError(path, None, where, "missing (NULL)")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordError(
                path, None, where, f"not UTF-8 ({e.reason} at byte {e.start})"
            ) from None
    if not isinstance(raw, str):
        raise RecordError(path, None, where, f"expected JSON text, found {type(raw).__name__}")
    try:
        return json_text.loads(raw, path, None, where)
    except ValueError as e:
        if isinstance(e, RecordError):
            raise
        raise RecordError(path, None, where, f"bad JSON: {e}") from None
