"""Goose sessions: `sessions.db` (Goose 1.10 and later) and the older `<session>.jsonl` files.

Read from block/goose: `crates/goose/src/session/session_manager.rs` (commit
01643006, schema version 5: tables `sessions` and `messages`, one row a
message, its content the JSON of `Vec<MessageContent>` in `content_json`;
commit dbec1655, schema version 9, adds `provider_name`,
`model_config_json` and `messages.message_id`), the message shapes in
`crates/goose/src/conversation/message.rs` and `tool_result_serde.rs` (commit
05132966), and the files those versions import, `session/legacy.rs` (commit
0fc5e540): a first line of session metadata (`working_dir`, `description`,
token counts), then one serialized `Message` a line. Both live in
`~/.local/share/goose/sessions/` on Linux and macOS alike (Goose uses the XDG
layout on both; `GOOSE_PATH_ROOT` moves it to `<root>/data/sessions/`).

A database holds every session, a subagent's (`session_type` `sub_agent`)
included: each is a Session of its own, its source naming the type. A JSONL
file is one session named by its file stem.

Messages are in the order Goose loads them (`timestamp`, then row id). A
message's content items become records in order:
- `text` -> the message's role (user or assistant);
- `image` -> a placeholder line (the base64 data is never rendered);
- `toolRequest` and `frontendToolRequest` -> `Tool call <name>: <arguments>`
  in an assistant record (a call Goose could not parse shows its error);
- `toolResponse` -> a tool_result record of the result's text content
  (`isError`, or a failed call, sets `is_error`); both the current
  `{content, isError}` value and the older bare list of contents are read;
- `thinking` -> `Thinking: <text>` (dropped, and counted, under
  drop_thinking); `redactedThinking` is encrypted and only counted;
- UI-only items (`toolConfirmationRequest`, `actionRequired`,
  `systemNotification`, compaction notices) and kinds this reader does not
  know are counted by type, never rendered.
A message the agent never saw (`metadata.agentVisible` false) is kept, its
source saying so.

Sources name the file, the session, the row (or line), the message's
creation time (s); tool calls and results carry `call_id` and the tool. The
first record of a session holds its name, working directory, creation and
update times, provider and model where the store has them.
"""

from __future__ import annotations

import os
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts import sqlite
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    blob_placeholder,
    is_not,
    iter_json_objects,
    record,
    session_stem,
    thinking_part,
    tool_call_text,
)

NAME = "goose"
LOCATIONS = (
    "{XDG_DATA_HOME}/goose/sessions/sessions.db",
    "{XDG_DATA_HOME}/goose/sessions/*.jsonl",
    "${GOOSE_PATH_ROOT}/data/sessions/sessions.db",
    "${GOOSE_PATH_ROOT}/data/sessions/*.jsonl",
)
TABLES = {
    "sessions": ("id", "working_dir"),
    "messages": ("session_id", "role", "content_json", "created_timestamp"),
}
CONTENT_TYPES = frozenset(
    {
        "text",
        "image",
        "toolRequest",
        "toolResponse",
        "toolConfirmationRequest",
        "actionRequired",
        "frontendToolRequest",
        "thinking",
        "redactedThinking",
        "systemNotification",
        "conversationCompacted",
        "contextLengthExceeded",
        "summarizationRequested",
    }
)
UI_ONLY = frozenset(
    {
        "toolConfirmationRequest",
        "actionRequired",
        "systemNotification",
        "conversationCompacted",
        "contextLengthExceeded",
        "summarizationRequested",
    }
)
META_KEYS = ("working_dir", "description")


# ------------------------------------------------------------------ detection


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    if sqlite.is_sqlite(head):
        return sqlite.has_tables(path, head, TABLES, "Goose")
    obj = head.first_line
    if not isinstance(obj, dict):
        return NotThisFormat(is_not("the first line", obj, "a JSON object"))
    if all(k in obj for k in META_KEYS) and "role" not in obj:
        return True
    if _is_message(obj):
        return True
    return NotThisFormat("the first line is neither Goose session metadata nor a Goose message")


def _is_message(obj: dict) -> bool:
    content = obj.get("content")
    return (
        obj.get("role") in ("user", "assistant")
        and isinstance(obj.get("created"), int)
        and isinstance(content, list)
        and all(isinstance(c, dict) and c.get("type") in CONTENT_TYPES for c in content)
    )


def count_sessions(path: str | os.PathLike[str]) -> int | None:
    """`grumem discover`'s count: a store's session rows (sqlite.count), a subagent's
    included; a JSONL file is one session."""
    if Path(path).suffix == ".jsonl":
        return 1
    return sqlite.count(
        path, lambda conn: int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    )


# ------------------------------------------------------------------ reading


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    with open(path, "rb") as f:
        is_db = f.read(len(sqlite.HEADER)) == sqlite.HEADER
    if is_db:
        return _read_db(path, drop_thinking)
    return [_read_jsonl(path, drop_thinking)]


def _read_db(path: str, drop_thinking: bool) -> list[Session]:
    sessions, messages = sqlite.read_snapshot(path, lambda conn: _load_db(conn, path))
    out = []
    for row in sessions:
        sid = str(row["id"])
        session = Session(sid)
        names: dict[str, str] = {}
        for rowid, role, content, created, visible in messages.get(sid, []):
            src: dict[str, Any] = {"file": path, "session": sid, "row": rowid, "time": created}
            if visible is False:
                src["agent_visible"] = False
            _message(
                role,
                content,
                src,
                f"messages[{rowid}].content_json",
                path,
                session,
                drop_thinking,
                names,
            )
        _session_info(session, row)
        out.append(session)
    return out


def _load_db(
    conn: sqlite3.Connection, path: str
) -> tuple[list[dict[str, Any]], dict[str, list[tuple[int, str, Any, Any, bool | None]]]]:
    found = sqlite.tables(conn)
    if not all(t in found for t in TABLES):
        raise RecordError(path, None, None, "not a Goose store: no sessions and messages tables")
    wanted = [
        "id", "name", "description", "working_dir", "session_type", "created_at",
        "updated_at", "provider_name", "model_config_json",
    ]  # fmt: skip
    cols = [c for c in wanted if c in found["sessions"]]
    conn.row_factory = sqlite3.Row
    sessions = [
        dict(r)
        for r in conn.execute(f"SELECT {', '.join(cols)} FROM sessions ORDER BY created_at, id")
    ]
    order = "timestamp, id" if "timestamp" in found["messages"] else "id"
    meta = "metadata_json" if "metadata_json" in found["messages"] else "NULL"
    messages: dict[str, list[tuple[int, str, Any, Any, bool | None]]] = defaultdict(list)
    query = (
        f"SELECT id, session_id, role, content_json, created_timestamp, {meta} "
        f"FROM messages ORDER BY session_id, {order}"
    )
    for rowid, sid, role, content, created, metadata in conn.execute(query):
        where = f"messages[{rowid}]"
        value = sqlite.json_value(path, f"{where}.content_json", content)
        visible = None
        if metadata is not None:
            m = sqlite.json_value(path, f"{where}.metadata_json", metadata)
            if isinstance(m, dict) and m.get("agentVisible") is False:
                visible = False
        messages[str(sid)].append((rowid, role, value, created, visible))
    return sessions, messages


def _read_jsonl(path: str, drop_thinking: bool) -> Session:
    session = Session(session_stem(path, (".jsonl",)))
    info: dict[str, Any] = {}
    names: dict[str, str] = {}
    for line, obj in iter_json_objects(path):
        if line == 1 and "role" not in obj:
            info = {"name": obj.get("description"), "working_dir": obj.get("working_dir")}
            continue
        role = obj.get("role")
        src: dict[str, Any] = {"file": path, "line": line}
        if isinstance(obj.get("id"), str):
            src["message_id"] = obj["id"]
        if isinstance(obj.get("created"), int):
            src["time"] = obj["created"]
        meta = obj.get("metadata")
        if isinstance(meta, dict) and meta.get("agentVisible") is False:
            src["agent_visible"] = False
        _message(role, obj.get("content"), src, "content", path, session, drop_thinking, names)
    _session_info(session, info)
    return session


def _session_info(session: Session, row: dict[str, Any]) -> None:
    if not session.records:
        return
    first = session.records[0]["source"]
    title = row.get("name") or row.get("description")
    model_config = row.get("model_config_json")
    model = None
    if isinstance(model_config, str):
        try:
            parsed = sqlite.json_value(first["file"], "sessions.model_config_json", model_config)
        except RecordError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("model_name"), str):
            model = parsed["model_name"]
    for key, value in (
        ("title", title),
        ("working_dir", row.get("working_dir")),
        ("session_type", row.get("session_type")),
        ("created", row.get("created_at")),
        ("updated", row.get("updated_at")),
        ("provider", row.get("provider_name")),
        ("model", model),
    ):
        if value not in (None, ""):
            first[key] = value


# ------------------------------------------------------------------ mapping


def _message(
    role: Any,
    content: Any,
    src: dict[str, Any],
    where: str,
    path: str,
    session: Session,
    drop_thinking: bool,
    names: dict[str, str],
) -> None:
    """One message's records; `names` maps the session's call ids to their tools."""
    if role not in ("user", "assistant"):
        raise RecordError(path, src.get("line"), where, f"unknown role {role!r}")
    if not isinstance(content, list):
        raise RecordError(path, src.get("line"), where, "expected a list of content items")
    pending: list[str] = []
    call_ids: list[str] = []
    before = (len(session.records), sum(session.skipped.values()))

    def flush() -> None:
        if pending:
            source = {**src, "call_ids": list(call_ids)} if call_ids else src
            session.records.append(record(role, "\n\n".join(pending), source))
            pending.clear()
            call_ids.clear()

    for i, item in enumerate(content):
        iwhere = f"{where}[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            text = item.get("text")
            if not isinstance(text, str):
                raise RecordError(
                    path, src.get("line"), f"{iwhere}.text", "missing or not a string"
                )
            if text:
                pending.append(text)
        elif kind == "image":
            data = item.get("data")
            pending.append(
                blob_placeholder("image", str(item.get("mimeType", "unknown")), str(data or ""))
            )
        elif kind in ("toolRequest", "frontendToolRequest"):
            call_id = str(item.get("id"))
            pending.append(_call_text(item.get("toolCall"), path, src, iwhere))
            call_ids.append(call_id)
            if (name := _call_name(item.get("toolCall"))) is not None:
                names[call_id] = name
        elif kind == "toolResponse":
            flush()
            call_id = str(item.get("id"))
            text, is_error = _result_text(item.get("toolResult"), path, src, iwhere)
            rsrc: dict[str, Any] = {**src, "call_id": call_id}
            if call_id in names:
                rsrc["tool"] = names[call_id]
            if is_error:
                rsrc["is_error"] = True
            session.records.append(record("tool_result", text, rsrc))
        elif kind == "thinking":
            text = item.get("thinking")
            if not isinstance(text, str):
                raise RecordError(
                    path, src.get("line"), f"{iwhere}.thinking", "missing or not a string"
                )
            if (part := thinking_part(text, drop_thinking, session)) is not None:
                pending.append(part)
        elif kind == "redactedThinking":
            session.skipped["redactedThinking"] += 1
        elif kind in UI_ONLY:
            session.skipped[str(kind)] += 1
        else:
            session.skipped[f"content:{kind}"] += 1
    flush()
    if (len(session.records), sum(session.skipped.values())) == before:
        session.skipped[f"empty {role} message"] += 1


def _call_name(call: Any) -> str | None:
    if isinstance(call, dict) and isinstance(call.get("value"), dict):
        name = call["value"].get("name")
        return name if isinstance(name, str) else None
    return None


def _call_text(call: Any, path: str, src: dict[str, Any], where: str) -> str:
    if not isinstance(call, dict) or call.get("status") not in ("success", "error"):
        raise RecordError(
            path, src.get("line"), f"{where}.toolCall", "expected {status, value | error}"
        )
    if call["status"] == "error":
        return f"Tool call (invalid): {call.get('error', '')}"
    value = call.get("value")
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise RecordError(path, src.get("line"), f"{where}.toolCall.value.name", "missing")
    return tool_call_text(value["name"], value.get("arguments") or {})


def _result_text(result: Any, path: str, src: dict[str, Any], where: str) -> tuple[str, bool]:
    if not isinstance(result, dict) or result.get("status") not in ("success", "error"):
        raise RecordError(
            path, src.get("line"), f"{where}.toolResult", "expected {status, value | error}"
        )
    if result["status"] == "error":
        return str(result.get("error", "")), True
    value = result.get("value")
    is_error = False
    if isinstance(value, dict):  # CallToolResult
        is_error = value.get("isError") is True
        value = value.get("content")
    if not isinstance(value, list):
        raise RecordError(
            path, src.get("line"), f"{where}.toolResult.value", "expected content items"
        )
    pieces = []
    for j, c in enumerate(value):
        kind = c.get("type") if isinstance(c, dict) else None
        if kind == "text":
            pieces.append(str(c.get("text", "")))
        elif kind == "image":
            pieces.append(
                blob_placeholder("image", str(c.get("mimeType", "unknown")), str(c.get("data", "")))
            )
        elif kind == "resource" and isinstance(c.get("resource"), dict):
            res = c["resource"]
            pieces.append(
                res["text"] if isinstance(res.get("text"), str) else f"[resource: {res.get('uri')}]"
            )
        else:
            raise RecordError(
                path,
                src.get("line"),
                f"{where}.toolResult.value[{j}].type",
                f"unknown content {kind!r}",
            )
    return "\n\n".join(pieces), is_error
