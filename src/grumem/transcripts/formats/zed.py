"""Zed's agent threads: `threads.db`, one row a thread, its body zstd-compressed JSON.

Read from zed-industries/zed: `crates/agent/src/db.rs` (commit 0642ec7e): the
table `threads (id, summary, updated_at, data_type, data)`, later with
`parent_id`, `folder_paths`, `folder_paths_order` and `created_at`; `data`
is the thread's JSON, zstd-compressed (`data_type` `zstd`) or plain (`json`).
The JSON is the `DbThread` of version 0.3.0 (`title`, `messages`, `model`,
...; messages as in `crates/agent/src/thread.rs`: `{"User": {id, content}}`,
`{"Agent": {content, tool_results}}` or `"Resume"`), or a thread the first
agent panel saved, `crates/agent/src/legacy_thread.rs` (commit 4410b970):
version 0.1.0 / 0.2.0 `SerializedThread` (messages `{id, role, segments,
tool_uses, tool_results, context}`) and the unversioned one before it
(`{id, role, text, ...}`); Zed upgrades those when it opens them, grumem reads
each as it is stored. The database is `~/.local/share/zed/threads/threads.db`
on Linux (`$XDG_DATA_HOME/zed`), `~/Library/Application Support/Zed/threads/threads.db`
on macOS. Decompression is the maintained `zstandard` package's.

Each thread is a Session (its id the thread's); a subagent's thread has a row
of its own (`parent_id`), a Session of its own whose source names the parent.

Records:
- a user message: its text, mentions (`[mention <uri>]` and the mentioned
  content, as Zed sends it) and image placeholders, one user record;
  `Resume` (Zed's "continue") the user line Zed sends for it;
- an agent message: text, `Thinking: <text>` (dropped, and counted, under
  drop_thinking), tool uses as `Tool call <name>: <input>`, in order, one
  assistant record; then each tool result (in the order Zed keeps them) a
  tool_result record naming the call and the tool, `is_error` when it failed;
  a result's `output` is Zed's debug copy and is not rendered;
- redacted thinking is encrypted and only counted; legacy `system` messages
  become system records; unknown content kinds are counted, never rendered.
The first record of a thread holds its title, update and creation times and
the model (`provider/model`).
"""

from __future__ import annotations

import io
import os
import sqlite3
from typing import Any

import zstandard

from grumem.core.json_text import dumps
from grumem.errors import RecordError
from grumem.transcripts import sqlite
from grumem.transcripts.base import (
    Detection,
    Head,
    Session,
    blob_placeholder,
    record,
    thinking_part,
    tool_call_text,
)

NAME = "zed"
LOCATIONS = (
    "{XDG_DATA_HOME}/zed/threads/threads.db",
    "{APP_SUPPORT}/Zed/threads/threads.db",
)
TABLES = {"threads": ("id", "summary", "updated_at", "data_type", "data")}
# a zstd frame this large when decompressed is not a thread (a bound against a bomb)
MAX_THREAD_BYTES = 1 << 30


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    return sqlite.has_tables(path, head, TABLES, "Zed")


def count_sessions(path: str | os.PathLike[str]) -> int | None:
    """`grumem discover`'s count: the threads, a subagent's included (sqlite.count)."""
    return sqlite.count(
        path, lambda conn: int(conn.execute("SELECT count(*) FROM threads").fetchone()[0])
    )


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    rows = sqlite.read_snapshot(path, lambda conn: _rows(conn, path))
    return [_thread(path, row, drop_thinking) for row in rows]


def _rows(conn: sqlite3.Connection, path: str) -> list[dict[str, Any]]:
    found = sqlite.tables(conn)
    if "threads" not in found:
        raise RecordError(path, None, None, "no table 'threads': not Zed's threads.db")
    wanted = ["id", "summary", "updated_at", "created_at", "parent_id", "data_type", "data"]
    cols = [c for c in wanted if c in found["threads"]]
    order = "created_at, updated_at, id" if "created_at" in cols else "updated_at, id"
    conn.row_factory = sqlite3.Row
    return [
        dict(r) for r in conn.execute(f"SELECT {', '.join(cols)} FROM threads ORDER BY {order}")
    ]


def _thread(path: str, row: dict[str, Any], drop_thinking: bool) -> Session:
    tid = str(row["id"])
    where = f"threads[{tid}].data"
    data = row["data"]
    if isinstance(data, str):
        data = data.encode("utf-8")
    if row["data_type"] == "zstd":
        data = _decompressed(data, path, where)
    elif row["data_type"] != "json":
        raise RecordError(path, None, f"threads[{tid}].data_type", f"unknown {row['data_type']!r}")
    doc = sqlite.json_value(path, where, data)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise RecordError(path, None, where, "expected a thread object with messages")
    session = Session(tid)
    src = {"file": path, "thread": tid}
    names: dict[str, str] = {}
    for i, msg in enumerate(doc["messages"]):
        mwhere = f"{where}.messages[{i}]"
        msrc = {**src, "index": i}
        if msg == "Resume":
            session.records.append(
                record("user", "Continue where you left off", {**msrc, "kind": "resume"})
            )
        elif isinstance(msg, dict) and len(msg) == 1 and ("User" in msg or "Agent" in msg):
            if "User" in msg:
                _user(msg["User"], msrc, mwhere + ".User", path, session)
            else:
                _agent(msg["Agent"], msrc, mwhere + ".Agent", path, session, drop_thinking, names)
        elif isinstance(msg, dict) and "role" in msg:
            _legacy(msg, msrc, mwhere, path, session, drop_thinking, names)
        else:
            raise RecordError(path, None, mwhere, "neither a User, Agent nor Resume message")
    _info(session, row, doc)
    return session


def _decompressed(data: bytes, path: str, where: str) -> bytes:
    """A zstd frame's content, read in steps so a frame that would expand past
    MAX_THREAD_BYTES is refused before it is held."""
    parts: list[bytes] = []
    size = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
            while block := reader.read(1 << 20):
                size += len(block)
                if size > MAX_THREAD_BYTES:
                    raise RecordError(path, None, where, "decompresses past 1 GiB: not a thread")
                parts.append(block)
    except zstandard.ZstdError as e:
        raise RecordError(path, None, where, f"not a zstd frame: {e}") from None
    return b"".join(parts)


def _info(session: Session, row: dict[str, Any], doc: dict) -> None:
    if not session.records:
        return
    first = session.records[0]["source"]
    model = doc.get("model")
    model_name = None
    if isinstance(model, dict) and model.get("model"):
        model_name = "/".join(str(model[k]) for k in ("provider", "model") if model.get(k))
    for key, value in (
        ("title", row.get("summary") or doc.get("title") or doc.get("summary")),
        ("updated", row.get("updated_at")),
        ("created", row.get("created_at")),
        ("parent", row.get("parent_id")),
        ("model", model_name),
    ):
        if value not in (None, ""):
            first[key] = value


def _image(value: Any) -> str:
    source = value.get("source", "") if isinstance(value, dict) else ""
    return blob_placeholder("image", "image/png", str(source))


def _user(msg: Any, src: dict[str, Any], where: str, path: str, session: Session) -> None:
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        raise RecordError(path, None, f"{where}.content", "expected a list")
    pieces = []
    for j, item in enumerate(content):
        kind, value = _variant(item, path, f"{where}.content[{j}]")
        if kind == "Text":
            pieces.append(str(value))
        elif kind == "Mention" and isinstance(value, dict):
            uri = dumps(value.get("uri"))
            text = value.get("content") or ""
            pieces.append(f"[mention {uri}]" + (f"\n{text}" if text else ""))
        elif kind == "Image":
            pieces.append(_image(value))
        else:
            session.skipped[f"user content:{kind}"] += 1
    texts = [p for p in pieces if p]
    if texts:
        mid = msg.get("id")
        source = {**src, "message_id": mid} if isinstance(mid, str) else src
        session.records.append(record("user", "\n\n".join(texts), source))
    else:
        session.skipped["empty user message"] += 1


def _variant(item: Any, path: str, where: str) -> tuple[str, Any]:
    """An externally tagged enum value: `{"Kind": value}`, or a unit variant `"Kind"`."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, dict) and len(item) == 1:
        ((kind, value),) = item.items()
        return kind, value
    raise RecordError(path, None, where, "expected {Kind: value}")


def _agent(
    msg: Any,
    src: dict[str, Any],
    where: str,
    path: str,
    session: Session,
    drop_thinking: bool,
    names: dict[str, str],
) -> None:
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        raise RecordError(path, None, f"{where}.content", "expected a list")
    pieces: list[str] = []
    call_ids: list[str] = []
    for j, item in enumerate(content):
        kind, value = _variant(item, path, f"{where}.content[{j}]")
        if kind == "Text":
            if value:
                pieces.append(str(value))
        elif kind == "Thinking":
            text = value.get("text") if isinstance(value, dict) else None
            if not isinstance(text, str):
                raise RecordError(path, None, f"{where}.content[{j}].Thinking.text", "missing")
            if (part := thinking_part(text, drop_thinking, session)) is not None:
                pieces.append(part)
        elif kind == "RedactedThinking":
            session.skipped["redacted thinking"] += 1
        elif kind == "ToolUse" and isinstance(value, dict):
            name, call_id = value.get("name"), value.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise RecordError(path, None, f"{where}.content[{j}].ToolUse", "no name and id")
            names[call_id] = name
            call_ids.append(call_id)
            pieces.append(tool_call_text(name, value.get("input", {})))
        elif kind == "Image":
            pieces.append(_image(value))
        else:
            session.skipped[f"agent content:{kind}"] += 1
    if pieces:
        source = {**src, "call_ids": call_ids} if call_ids else src
        session.records.append(record("assistant", "\n\n".join(pieces), source))
    results = msg.get("tool_results") or {}
    if not isinstance(results, dict):
        raise RecordError(path, None, f"{where}.tool_results", "expected an object by tool use id")
    for call_id, result in results.items():
        _result(result, str(call_id), names, src, f"{where}.tool_results.{call_id}", path, session)
    if not pieces and not results:
        session.skipped["empty agent message"] += 1


def _result(
    result: Any,
    call_id: str,
    names: dict[str, str],
    src: dict[str, Any],
    where: str,
    path: str,
    session: Session,
) -> None:
    if not isinstance(result, dict):
        raise RecordError(path, None, where, "expected a tool result object")
    source: dict[str, Any] = {**src, "call_id": call_id}
    name = result.get("tool_name") or names.get(call_id)
    if isinstance(name, str):
        source["tool"] = name
    if result.get("is_error") is True:
        source["is_error"] = True
    text = _result_content(result.get("content"), path, f"{where}.content")
    session.records.append(record("tool_result", text, source))


def _result_content(content: Any, path: str, where: str) -> str:
    """Every shape Zed's LanguageModelToolResultContent reads: a string, `{"Text": s}`,
    `{"type": "text", "text": s}`, `{"text": s}`, an image (wrapped or bare), or a list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(_result_content(c, path, f"{where}[{i}]") for i, c in enumerate(content))
    if isinstance(content, dict):
        lower = {str(k).lower(): v for k, v in content.items()}
        if isinstance(lower.get("text"), str):
            return str(lower["text"])
        if "image" in lower:
            return _image(lower["image"])
        if "source" in lower:
            return _image(content)
    raise RecordError(path, None, where, "expected text or an image")


def _legacy(
    msg: dict,
    src: dict[str, Any],
    where: str,
    path: str,
    session: Session,
    drop_thinking: bool,
    names: dict[str, str],
) -> None:
    """One message of a thread the first agent panel saved; `names` maps the thread's
    tool use ids to their tools (a 0.1.0 thread answers them on the next user message)."""
    role = msg.get("role")
    if role not in ("user", "assistant", "system"):
        raise RecordError(path, None, f"{where}.role", f"unknown role {role!r}")
    msrc = {**src, "message_id": msg["id"]} if isinstance(msg.get("id"), int | str) else src
    if msg.get("is_hidden") is True:
        msrc["hidden"] = True
    segments = msg.get("segments")
    if segments is None and isinstance(msg.get("text"), str):
        segments = [{"type": "text", "text": msg["text"]}]  # before 0.1.0
    pieces: list[str] = []
    for seg in segments or []:
        kind = seg.get("type") if isinstance(seg, dict) else None
        if kind == "text":
            if seg.get("text"):
                pieces.append(str(seg["text"]))
        elif kind == "thinking":
            if (
                part := thinking_part(str(seg.get("text", "")), drop_thinking, session)
            ) is not None:
                pieces.append(part)
        elif kind == "RedactedThinking":
            session.skipped["redacted thinking"] += 1
        else:
            session.skipped[f"segment:{kind}"] += 1
    if isinstance(msg.get("context"), str) and msg["context"]:
        pieces.append(msg["context"])
    call_ids: list[str] = []
    for use in msg.get("tool_uses") or []:
        if isinstance(use, dict) and isinstance(use.get("name"), str):
            call_ids.append(str(use.get("id")))
            names[call_ids[-1]] = use["name"]
            pieces.append(tool_call_text(use["name"], use.get("input", {})))
    if pieces:
        source = {**msrc, "call_ids": call_ids} if call_ids else msrc
        session.records.append(record(role, "\n\n".join(pieces), source))
    results = msg.get("tool_results") or []
    for k, result in enumerate(results):
        call_id = str(result.get("tool_use_id")) if isinstance(result, dict) else ""
        _result(result, call_id, names, src, f"{where}.tool_results[{k}]", path, session)
    if not pieces and not results:
        session.skipped[f"empty {role} message"] += 1
