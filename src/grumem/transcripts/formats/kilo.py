"""Kilo CLI sessions: `kilo.db`, Kilo's copy of OpenCode's SQLite store.

Read from Kilo-Org/kilocode: `packages/opencode/src/session/session.sql.ts`
(commit 18369fa0) keeps OpenCode's `session`, `message` and `part` tables
and their JSON `data` columns, adding the session columns `current_state`
and `recent_progress` and a `task` table (marked `kilocode_change`); the
database is `$XDG_DATA_HOME/kilo/kilo.db` (`kilo-<channel>.db` for a preview
channel; `KILO_DB` overrides it), per the CLI's `storage/db.ts`. The rows are
read, and mapped to records, by the `opencode` format's code: see its
docstring for what each part becomes and what is counted and left out.

A file is Kilo's when it has OpenCode's tables and is named `kilo*.db` or holds
Kilo's columns; OpenCode's detector refuses such a file, this one refuses
OpenCode's own store.

Kilo Code's VS Code extension (before the CLI) kept Cline's layout,
`<globalStorage>/kilocode.kilo-code/tasks/<task id>/api_conversation_history.json`:
Anthropic messages, read by the `anthropic` format (detected as such), so they
are not listed here.
"""

from __future__ import annotations

import os

from grumem.transcripts import sqlite
from grumem.transcripts.base import Detection, Head, Session
from grumem.transcripts.formats import opencode

NAME = "kilo"
LOCATIONS = (
    "{XDG_DATA_HOME}/kilo/kilo.db",
    "{XDG_DATA_HOME}/kilo/kilo-*.db",
    "${KILO_DB}",
)


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    return opencode.detect_db(path, head, kilo=True)


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    return opencode.read_db(path, drop_thinking)


def count_sessions(path: str | os.PathLike[str]) -> int | None:
    """`grumem discover`'s count: the store's session rows, as OpenCode's."""
    return sqlite.count(path, opencode.count_db)
