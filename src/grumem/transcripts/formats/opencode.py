"""OpenCode sessions: the `opencode.db` SQLite store (1.2 and later) and the older JSON tree.

Read from anomalyco/opencode (formerly sst/opencode): the tables in
`packages/opencode/src/session/session.sql.ts` (commit 063e8306, the 1.2+
store: `session`, `message`, `part`, one JSON `data` column per message and
part), the message and part shapes in `packages/opencode/src/session/message-v2.ts`
(commit 007a9409), and the JSON tree the 1.2 migration reads,
`packages/opencode/src/storage/json-migration.ts` (commit 062aa8c0):
`storage/session/<project>/<session>.json`, `storage/message/<session>/<message>.json`,
`storage/part/<message>/<part>.json`, each file the object the table row holds
(with its ids). Kilo's CLI (the `kilo` format) is a fork that keeps this same
schema in `kilo.db`; it is read by this module's code.

Both live in `$XDG_DATA_HOME/opencode/` (`~/.local/share/opencode/`, on macOS
too: OpenCode uses the XDG layout everywhere): `opencode.db`, or
`opencode-<channel>.db` for a preview channel, and `OPENCODE_DB` names another
file (`packages/opencode/src/storage/db.ts`; `grumem discover` follows it when it
is an absolute path); the tree is `storage/` beside it.

The database is read through grumem.transcripts.sqlite (read-only, immutable,
a consistent snapshot). A database holds every session: each is a Session of
its own, a subagent's (a `task` tool's child, `parent_id` set) included, its
source naming the parent. For the JSON tree the transcript is the session file;
its messages and parts are found beside it in the storage folder.

Messages are in creation order (`time_created`, then id), parts in id order (the
order OpenCode itself loads them). A message's parts become records in order:
- `text` (not `ignored`) -> the message's role (user or assistant);
- `reasoning` -> `Thinking: <text>` in an assistant record (dropped, and
  counted, under drop_thinking);
- `tool` -> `Tool call <tool>: <input>` in an assistant record, then its
  outcome as a tool_result record: the output of a completed call (with
  placeholders for its attachments), the error of a failed one
  (`is_error`); a call still pending or running has no result (counted);
- `file` -> a placeholder line in the message (`[file: <mime>, ...]`), except
  text and directory attachments, which OpenCode sends as the synthetic text
  parts next to them (counted as `file (sent as text)`);
- `subtask` -> a user record naming the agent and its prompt;
- bookkeeping the model never reads (`step-start`, `step-finish`, `snapshot`,
  `patch`, `retry`, `agent`, `compaction` markers) and part types this reader
  does not know are counted by type, never rendered.
Rows of tables newer OpenCode versions add beside these (`session_message`,
`session_entry`) are counted per session, by their `type`, so a store written
by a newer version says what was left out.

Sources: every record names the file, the session, the message (and its
parts), its creation time (ms) and, on assistant records, the model
(`provider/model`); tool calls and results carry `call_id` and `tool`. The
first record of a session also holds its title, creation and update times
and, for a subagent, its parent session.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts import sqlite
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    data_url_placeholder,
    is_not,
    load_json_document,
    record,
    thinking_part,
    tool_call_text,
)

NAME = "opencode"
LOCATIONS = (
    "{XDG_DATA_HOME}/opencode/opencode.db",
    "{XDG_DATA_HOME}/opencode/opencode-*.db",
    "${OPENCODE_DB}",
    "{XDG_DATA_HOME}/opencode/storage/session/*/*.json",
)
TABLES = {
    "session": ("id", "title", "time_created"),
    "message": ("id", "session_id", "time_created", "data"),
    "part": ("id", "message_id", "session_id", "data"),
}
# what only Kilo's fork of the schema has (kilocode_change columns, its task table)
KILO_COLUMNS = frozenset({"current_state", "recent_progress"})
SIDE_TABLES = ("session_message", "session_entry")
BOOKKEEPING_PARTS = frozenset(
    {"step-start", "step-finish", "snapshot", "patch", "retry", "agent", "compaction"}
)
TEXT_ATTACHMENTS = ("text/plain", "application/x-directory")


def count_sessions(path: str | os.PathLike[str]) -> int | None:
    """`grumem discover`'s count: a store's session rows (sqlite.count); a session file
    of the JSON tree is one session."""
    if Path(path).suffix == ".json":
        return 1
    return sqlite.count(path, count_db)


def count_db(conn: sqlite3.Connection) -> int:
    """The sessions read_db reads: every row of `session`, a subagent's included."""
    return int(conn.execute("SELECT count(*) FROM session").fetchone()[0])


# ------------------------------------------------------------------ detection


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    if sqlite.is_sqlite(head):
        return detect_db(path, head, kilo=False)
    return _detect_tree(path, head)


def detect_db(path: str | os.PathLike[str], head: Head, kilo: bool) -> Detection:
    """OpenCode's tables; `kilo` asks for Kilo's copy of them (named `kilo*.db`, or
    with the columns only Kilo adds), and OpenCode's check refuses that copy."""
    tool = "Kilo" if kilo else "OpenCode"
    verdict = sqlite.has_tables(path, head, TABLES, tool)
    if not verdict:
        return verdict
    found = sqlite.schema(path) or {}
    is_kilo = Path(path).name.startswith("kilo") or bool(KILO_COLUMNS & found.get("session", set()))
    if kilo and not is_kilo:
        return NotThisFormat(
            "OpenCode's tables, but neither named kilo*.db nor with Kilo's columns"
        )
    if not kilo and is_kilo:
        return NotThisFormat("Kilo's copy of OpenCode's tables (the kilo format)")
    return True


def _detect_tree(path: str | os.PathLike[str], head: Head) -> Detection:
    doc = head.document
    if not isinstance(doc, dict):
        return NotThisFormat(is_not("the file", doc, "an OpenCode session object"))
    sid = doc.get("id")
    if not (isinstance(sid, str) and sid.startswith("ses") and isinstance(doc.get("time"), dict)):
        return NotThisFormat("not an OpenCode session object (id ses..., time)")
    if Path(path).resolve().parent.parent.name != "session":
        return NotThisFormat("an OpenCode session file outside storage/session/<project>/")
    return True


# ------------------------------------------------------------------ reading


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    if _is_sqlite_file(path):
        return read_db(path, drop_thinking)
    return _read_tree(str(path), drop_thinking)


def _is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    with open(path, "rb") as f:
        return f.read(len(sqlite.HEADER)) == sqlite.HEADER


@dataclass
class _Message:
    id: str
    info: dict
    parts: list[tuple[str, dict]] = field(default_factory=list)  # (part id, data)


@dataclass
class _Store:
    """What a store holds, read once: sessions (id, row), messages by session, side rows."""

    sessions: list[tuple[str, dict[str, Any]]]
    messages: dict[str, list[_Message]]
    side: dict[str, Counter[str]]


def read_db(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    store = sqlite.read_snapshot(path, lambda conn: _load_db(conn, path))
    return [
        _to_session(path, sid, row, store.messages.get(sid, []), store.side.get(sid), drop_thinking)
        for sid, row in store.sessions
    ]


def _load_db(conn: sqlite3.Connection, path: str) -> _Store:
    found = sqlite.tables(conn)
    missing = [t for t in TABLES if t not in found]
    if missing:
        raise RecordError(path, None, None, f"no table {missing[0]!r}: not an OpenCode store")
    wanted = ["id", "title", "parent_id", "directory", "version", "time_created", "time_updated"]
    cols = [c for c in wanted if c in found["session"]]
    conn.row_factory = sqlite3.Row
    sessions = [
        (str(r["id"]), dict(r))
        for r in conn.execute(f"SELECT {', '.join(cols)} FROM session ORDER BY time_created, id")
    ]
    messages: dict[str, list[_Message]] = defaultdict(list)
    by_id: dict[str, _Message] = {}
    query = "SELECT id, session_id, data FROM message ORDER BY session_id, time_created, id"
    for mid, sid, data in conn.execute(query):
        info = sqlite.json_value(path, f"message[{mid}].data", data)
        if not isinstance(info, dict):
            raise RecordError(path, None, f"message[{mid}].data", "expected a JSON object")
        msg = _Message(str(mid), info)
        messages[str(sid)].append(msg)
        by_id[msg.id] = msg
    for pid, mid, data in conn.execute(
        "SELECT id, message_id, data FROM part ORDER BY message_id, id"
    ):
        part = sqlite.json_value(path, f"part[{pid}].data", data)
        if not isinstance(part, dict):
            raise RecordError(path, None, f"part[{pid}].data", "expected a JSON object")
        if str(mid) in by_id:
            by_id[str(mid)].parts.append((str(pid), part))
    side: dict[str, Counter[str]] = defaultdict(Counter)
    for table in SIDE_TABLES:
        if table in found and {"session_id", "type"} <= found[table]:
            q = f"SELECT session_id, type, count(*) FROM {table} GROUP BY session_id, type"
            for sid, kind, n in conn.execute(q):
                side[str(sid)][f"{table}:{kind}"] += n
    return _Store(sessions, messages, side)


def _read_tree(path: str, drop_thinking: bool) -> list[Session]:
    doc = load_json_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise RecordError(path, None, "id", "missing: not an OpenCode session file")
    sid = doc["id"]
    storage = Path(path).resolve().parent.parent.parent
    messages = []
    for mfile in sorted((storage / "message" / sid).glob("*.json")):
        info = load_json_document(mfile)
        if not isinstance(info, dict):
            raise RecordError(mfile, None, None, "expected a JSON object")
        msg = _Message(mfile.stem, info)
        for pfile in sorted((storage / "part" / mfile.stem).glob("*.json")):
            part = load_json_document(pfile)
            if not isinstance(part, dict):
                raise RecordError(pfile, None, None, "expected a JSON object")
            msg.parts.append((pfile.stem, part))
        messages.append(msg)
    messages.sort(key=lambda m: (_created(m.info), m.id))
    time = doc["time"] if isinstance(doc.get("time"), dict) else {}
    row = {
        "title": doc.get("title"),
        "parent_id": doc.get("parentID"),
        "time_created": time.get("created"),
        "time_updated": time.get("updated"),
    }
    return [_to_session(path, sid, row, messages, None, drop_thinking)]


def _created(info: dict) -> Any:
    time = info.get("time")
    created = time.get("created") if isinstance(time, dict) else None
    return created if isinstance(created, int | float) else 0


# ------------------------------------------------------------------ mapping


class _Builder:
    """Records of one session: consecutive assistant pieces form one record until a
    tool result (or another role) comes between."""

    def __init__(self, session: Session, path: str):
        self.session = session
        self.path = path
        self.pending: list[str] = []
        self.pending_source: dict[str, Any] | None = None
        self.call_ids: list[str] = []

    def add(self, role: str, text: str, source: dict[str, Any]) -> None:
        self.flush()
        self.session.records.append(record(role, text, source))

    def assistant(self, text: str, source: dict[str, Any], call_id: str | None = None) -> None:
        if self.pending_source is None:
            self.pending_source = source
        self.pending.append(text)
        if call_id is not None:
            self.call_ids.append(call_id)

    def flush(self) -> None:
        if self.pending and self.pending_source is not None:
            source = dict(self.pending_source)
            if self.call_ids:
                source["call_ids"] = list(self.call_ids)
            self.session.records.append(record("assistant", "\n\n".join(self.pending), source))
        self.pending, self.pending_source, self.call_ids = [], None, []


def _to_session(
    path: str,
    sid: str,
    row: dict[str, Any],
    messages: list[_Message],
    side: Counter[str] | None,
    drop_thinking: bool,
) -> Session:
    session = Session(sid, skipped=Counter(side or {}))
    out = _Builder(session, path)
    for msg in messages:
        before = (len(session.records), len(out.pending), sum(session.skipped.values()))
        _message(msg, sid, path, out, drop_thinking)
        out.flush()
        if (len(session.records), len(out.pending), sum(session.skipped.values())) == before:
            session.skipped[f"empty {msg.info.get('role')} message"] += 1
    out.flush()
    if session.records:
        first = session.records[0]["source"]
        for key, value in (
            ("title", row.get("title")),
            ("created", row.get("time_created")),
            ("updated", row.get("time_updated")),
            ("parent", row.get("parent_id")),
        ):
            if value not in (None, ""):
                first[key] = value
    return session


def _message(msg: _Message, sid: str, path: str, out: _Builder, drop_thinking: bool) -> None:
    info = msg.info
    role = info.get("role")
    where = f"message[{msg.id}]"
    if role not in ("user", "assistant"):
        raise RecordError(path, None, f"{where}.role", f"unknown role {role!r}")
    base: dict[str, Any] = {"file": path, "session": sid, "message_id": msg.id}
    created = _created(info)
    if created:
        base["time"] = created
    if role == "assistant":
        model = "/".join(str(info[k]) for k in ("providerID", "modelID") if info.get(k))
        if model:
            base["model"] = model
        error = info.get("error")
        if isinstance(error, dict) and isinstance(error.get("name"), str):
            base["error"] = error["name"]
        if info.get("summary") is True:
            base["summary"] = True
    user_text: list[str] = []
    user_parts: list[str] = []

    def flush_user() -> None:
        if user_text:
            out.add("user", "\n\n".join(user_text), {**base, "part_ids": list(user_parts)})
            user_text.clear()
            user_parts.clear()

    for pid, part in msg.parts:
        kind = part.get("type")
        pwhere = f"part[{pid}]"
        src = {**base, "part_id": pid}
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise RecordError(path, None, f"{pwhere}.text", "missing or not a string")
            if part.get("ignored") is True:
                out.session.skipped["ignored text"] += 1
            elif not text:
                out.session.skipped["empty text"] += 1
            elif role == "user":
                user_text.append(text)
                user_parts.append(pid)
            else:
                out.assistant(text, src)
        elif kind == "file":
            placeholder = _file_placeholder(part, path, pwhere, out.session)
            if placeholder is None:
                continue
            if role == "user":
                user_text.append(placeholder)
                user_parts.append(pid)
            else:
                out.assistant(placeholder, src)
        elif kind == "reasoning":
            text = part.get("text")
            if not isinstance(text, str):
                raise RecordError(path, None, f"{pwhere}.text", "missing or not a string")
            if (rendered := thinking_part(text, drop_thinking, out.session)) is not None:
                flush_user()
                out.assistant(rendered, src)
        elif kind == "tool":
            flush_user()
            _tool(part, src, path, pwhere, out)
        elif kind == "subtask":
            flush_user()
            agent = part.get("agent", "?")
            prompt = part.get("prompt", "")
            out.add("user", f"Subtask for agent {agent}: {prompt}", src)
        elif kind in BOOKKEEPING_PARTS:
            out.session.skipped[str(kind)] += 1
        else:
            out.session.skipped[f"part:{kind}"] += 1
    flush_user()


def _file_placeholder(part: dict, path: str, where: str, session: Session) -> str | None:
    mime = part.get("mime")
    url = part.get("url")
    if not isinstance(mime, str) or not isinstance(url, str):
        raise RecordError(path, None, where, "a file part without mime and url")
    if mime in TEXT_ATTACHMENTS:
        session.skipped["file (sent as text)"] += 1
        return None
    if url.startswith("data:"):
        return data_url_placeholder("file", url)
    name = part.get("filename")
    return f"[file: {mime}, {name if isinstance(name, str) else url}]"


def _tool(part: dict, src: dict[str, Any], path: str, where: str, out: _Builder) -> None:
    tool = part.get("tool")
    call_id = part.get("callID")
    state = part.get("state")
    if not isinstance(tool, str) or not isinstance(call_id, str) or not isinstance(state, dict):
        raise RecordError(path, None, where, "a tool part without tool, callID and state")
    status = state.get("status")
    out.assistant(tool_call_text(tool, state.get("input", {})), src, call_id)
    result_src = {**src, "call_id": call_id, "tool": tool}
    if status == "completed":
        output = state.get("output")
        if not isinstance(output, str):
            raise RecordError(path, None, f"{where}.state.output", "missing or not a string")
        pieces = [output]
        for attachment in state.get("attachments") or []:
            if isinstance(attachment, dict):
                pieces.append(_file_placeholder(attachment, path, where, out.session) or "")
        time = state.get("time")
        if isinstance(time, dict) and time.get("compacted"):
            result_src["compacted"] = True
        out.add(
            "tool_result",
            "\n\n".join(p for p in pieces if p) if len(pieces) > 1 else output,
            result_src,
        )
    elif status == "error":
        error = state.get("error")
        out.add(
            "tool_result", error if isinstance(error, str) else "", {**result_src, "is_error": True}
        )
    else:
        out.session.skipped[f"tool call {status}"] += 1
