"""Cursor's chats: the editor's `state.vscdb` (Composer and the older chat panel) and the
cursor-agent CLI's `store.db`.

Cursor's source is not public. The layouts were read from the public readers
of its files (each named, with its commit, in
fixtures/transcripts/cursor/SOURCES.md) and match Cursor 0.4x to 2.x (2024 to
2026):

- `state.vscdb` (`<Cursor User>/globalStorage/` and
  `workspaceStorage/<hash>/`), two key-value tables `ItemTable` and
  `cursorDiskKV` (`key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB`), values
  JSON. A Composer conversation (agent or chat) is
  `cursorDiskKV['composerData:<composer id>']`: its header (`name`,
  `createdAt`, `lastUpdatedAt` in ms, `modelConfig.modelName`,
  `subComposerIds`) and its bubbles in order, either inline (`conversation`,
  the older `_v` 1-2 layout) or as `fullConversationHeadersOnly`
  (`{bubbleId, type}`) with each bubble in
  `cursorDiskKV['bubbleId:<composer id>:<bubble id>']` (or, for some
  versions, in the header's `conversationMap`). A bubble's `type` is 1 (user)
  or 2 (assistant): `text`, `thinking.text`, and an agent's tool call in
  `toolFormerData` (`name`, arguments as a JSON string in `rawArgs` or
  `params`, `result` as a string, `status`, `toolCallId`).
- The chat panel before Composer kept its tabs in
  `ItemTable['workbench.panel.aichat.view.aichat.chatdata']`:
  `{tabs: [{tabId, chatTitle, bubbles: [{type: user | ai, text}]}]}`.
- cursor-agent (the CLI) keeps one `store.db` a chat,
  `~/.cursor/chats/<workspace hash>/<agent id>/store.db`: a `meta` row `0`
  (hex-encoded JSON: `agentId`, `name`, `createdAt`, `lastUsedModel`,
  `latestRootBlobId`) and content-addressed `blobs`. The root blob is
  protobuf whose field 1 repeats the 32-byte ids of the message blobs in
  order; each message blob is JSON in the AI SDK's message shape (`role`
  system, user, assistant or tool; `content` a string or parts `text`,
  `reasoning`, `tool-call`, `tool-result`).

Only the keys named above are ever read (`ItemTable` also holds Cursor's login
tokens). Every database goes through grumem.transcripts.sqlite: read-only,
immutable, one consistent snapshot even while Cursor writes its WAL.

Sessions: each Composer conversation (its id), each chat tab, each CLI chat.
A sub-composer (a subagent, listed in a parent's `subComposerIds`) is a
Session of its own whose first source names its parent. A workspace
`state.vscdb` of current Cursor versions holds only indices (the
conversations live in the global one): it is read as no sessions.

Records: a user bubble's text -> user; an assistant bubble -> one assistant
record of `Thinking: <text>` (dropped, and counted, under drop_thinking), its
text and `Tool call <name>: <arguments>`, then the tool's result as a
tool_result record (`is_error` when the call failed; a call cancelled or
still running has no result and is counted). Code blocks, diffs, context
pieces and usage data are Cursor's own bookkeeping of what the text already
says and are not rendered. Bubbles without any of these (capability
markers) are counted as empty; a header whose bubble is missing is counted.
A CLI chat's system message is a system record, a tool message's results
tool_result records. A blob that is not a JSON message (the protobuf messages
of 2025 cursor-agent builds) is counted, never guessed at.

Sources name the file, the conversation, the bubble (or blob) and its time
where Cursor kept one; the first record of a session holds its title,
creation and update times and model.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from grumem.core import json_text
from grumem.errors import RecordError
from grumem.transcripts import sqlite
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    data_url_placeholder,
    record,
    thinking_part,
    tool_call_text,
    tool_call_text_from_json,
)

NAME = "cursor"
# Cursor's own user directory (Electron's: $XDG_CONFIG_HOME on Linux), not VS Code's:
# VS Code's state.vscdb holds no Cursor chat
LOCATIONS = (
    "{XDG_CONFIG_HOME}/Cursor/User/globalStorage/state.vscdb",
    "{XDG_CONFIG_HOME}/Cursor/User/workspaceStorage/*/state.vscdb",
    "{APP_SUPPORT}/Cursor/User/globalStorage/state.vscdb",
    "{APP_SUPPORT}/Cursor/User/workspaceStorage/*/state.vscdb",
    "~/.cursor/chats/*/*/store.db",
)
CHATDATA = "workbench.panel.aichat.view.aichat.chatdata"
KV = {"ItemTable": ("key", "value")}
CLI = {"meta": ("key", "value"), "blobs": ("id", "data")}


# ------------------------------------------------------------------ detection


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    if not sqlite.is_sqlite(head):
        return sqlite.not_sqlite()
    found = sqlite.schema(path)
    if found is None:
        return NotThisFormat("a SQLite file that cannot be opened")
    if {"meta", "blobs"} <= set(found):
        return sqlite.has_tables(path, head, CLI, "cursor-agent")
    if "cursorDiskKV" in found:
        return sqlite.has_tables(path, head, {**KV, "cursorDiskKV": ("key", "value")}, "Cursor")
    if "ItemTable" in found:
        has_chat = sqlite.read_snapshot(
            path,
            lambda conn: conn.execute(
                "SELECT 1 FROM ItemTable WHERE key = ?", (CHATDATA,)
            ).fetchone(),
        )
        if has_chat:
            return True
        return NotThisFormat("a VS Code state.vscdb without Cursor's chats (no cursorDiskKV)")
    return NotThisFormat(
        "a SQLite database without Cursor's tables (cursorDiskKV, or meta and blobs)"
    )


def count_sessions(path: str | os.PathLike[str]) -> int | None:
    """`grumem discover`'s count (sqlite.count): a CLI store is one chat; a state.vscdb
    holds its chat tabs and its Composer conversations (not the null ones Cursor leaves
    behind a deleted conversation), counted by SQLite without reading them."""
    return sqlite.count(path, _count)


def _count(conn: sqlite3.Connection) -> int:
    found = sqlite.tables(conn)
    if {"meta", "blobs"} <= set(found):
        return 1
    n = 0
    if "ItemTable" in found:
        row = conn.execute(
            "SELECT json_array_length(CAST(value AS TEXT), '$.tabs') FROM ItemTable WHERE key = ?",
            (CHATDATA,),
        ).fetchone()
        n += int(row[0] or 0) if row is not None else 0
    if "cursorDiskKV" in found:
        n += int(
            conn.execute(
                "SELECT count(*) FROM cursorDiskKV WHERE key >= 'composerData:'"
                " AND key < 'composerData;' AND CAST(value AS TEXT) != 'null'"
            ).fetchone()[0]
        )
    return n


# ------------------------------------------------------------------ reading


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    return sqlite.read_snapshot(path, lambda conn: _read(conn, path, drop_thinking))


def _read(conn: sqlite3.Connection, path: str, drop_thinking: bool) -> list[Session]:
    found = sqlite.tables(conn)
    if {"meta", "blobs"} <= set(found):
        return [_cli_chat(conn, path, drop_thinking)]
    if "ItemTable" not in found:
        raise RecordError(path, None, None, "no ItemTable: not Cursor's state.vscdb")
    sessions: list[Session] = []
    row = conn.execute("SELECT value FROM ItemTable WHERE key = ?", (CHATDATA,)).fetchone()
    if row is not None:
        sessions.extend(_chat_tabs(sqlite.json_value(path, f"ItemTable[{CHATDATA}]", row[0]), path))
    if "cursorDiskKV" in found:
        sessions.extend(_composers(conn, path, drop_thinking))
    return sessions


def _kv(conn: sqlite3.Connection, key: str) -> Any:
    row = conn.execute("SELECT value FROM cursorDiskKV WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


# ------------------------------------------------------------------ composer


def _composers(conn: sqlite3.Connection, path: str, drop_thinking: bool) -> list[Session]:
    query = (
        "SELECT key, value FROM cursorDiskKV WHERE key >= 'composerData:' "
        "AND key < 'composerData;' ORDER BY key"
    )
    composers = []
    for key, value in conn.execute(query).fetchall():
        data = sqlite.json_value(path, f"cursorDiskKV[{key}]", value)
        if data is None:  # Cursor leaves JSON null behind a deleted conversation
            continue
        if not isinstance(data, dict):
            raise RecordError(path, None, f"cursorDiskKV[{key}]", "expected a JSON object")
        composers.append((key.split(":", 1)[1], data))
    parents = {
        str(child): cid for cid, data in composers for child in data.get("subComposerIds") or []
    }
    composers.sort(key=lambda c: (c[1].get("createdAt") or 0, c[0]))
    return [
        _composer(conn, path, cid, data, parents.get(cid), drop_thinking) for cid, data in composers
    ]


def _composer(
    conn: sqlite3.Connection,
    path: str,
    cid: str,
    data: dict,
    parent: str | None,
    drop_thinking: bool,
) -> Session:
    session = Session(cid)
    names: dict[str, str] = {}
    where = f"cursorDiskKV[composerData:{cid}]"
    inline = data.get("conversation")
    if isinstance(inline, list) and inline:
        bubbles = [
            (b.get("bubbleId"), b, f"{where}.conversation[{i}]") for i, b in enumerate(inline)
        ]
    else:
        bubbles = []
        cmap = data.get("conversationMap")
        if not isinstance(cmap, dict):
            cmap = {}
        for i, header in enumerate(data.get("fullConversationHeadersOnly") or []):
            bid = header.get("bubbleId") if isinstance(header, dict) else None
            if not isinstance(bid, str):
                raise RecordError(
                    path, None, f"{where}.fullConversationHeadersOnly[{i}]", "no bubbleId"
                )
            key = f"bubbleId:{cid}:{bid}"
            bubble = cmap.get(bid)
            if bubble is None:
                raw = _kv(conn, key)
                bubble = (
                    None if raw is None else sqlite.json_value(path, f"cursorDiskKV[{key}]", raw)
                )
            if not isinstance(bubble, dict):
                session.skipped["missing bubble"] += 1
                continue
            if "type" not in bubble and isinstance(header.get("type"), int):
                bubble = {**bubble, "type": header["type"]}
            bubbles.append((bid, bubble, f"cursorDiskKV[{key}]"))
    for bid, bubble, bwhere in bubbles:
        if not isinstance(bubble, dict):
            raise RecordError(path, None, bwhere, "expected a bubble object")
        src: dict[str, Any] = {"file": path, "composer": cid}
        if isinstance(bid, str):
            src["bubble_id"] = bid
        if bubble.get("createdAt"):
            src["time"] = bubble["createdAt"]
        _bubble(bubble, src, bwhere, path, session, drop_thinking, names)
    model = (
        data.get("modelConfig", {}).get("modelName")
        if isinstance(data.get("modelConfig"), dict)
        else None
    )
    _first(
        session,
        title=data.get("name"),
        created=data.get("createdAt"),
        updated=data.get("lastUpdatedAt"),
        model=model,
        parent=parent,
    )
    return session


def _first(session: Session, **info: Any) -> None:
    if session.records:
        first = session.records[0]["source"]
        first.update({k: v for k, v in info.items() if v not in (None, "")})


def _bubble(
    bubble: dict,
    src: dict[str, Any],
    where: str,
    path: str,
    session: Session,
    drop_thinking: bool,
    names: dict[str, str],
) -> None:
    kind = bubble.get("type")
    text = bubble.get("text")
    if text is not None and not isinstance(text, str):
        raise RecordError(path, None, f"{where}.text", "expected a string")
    if kind == 1:
        model = (
            bubble.get("modelInfo", {}).get("modelName")
            if isinstance(bubble.get("modelInfo"), dict)
            else None
        )
        pieces = [text] if text else []
        for image in bubble.get("images") or []:
            if isinstance(image, dict):
                pieces.append(
                    data_url_placeholder("image", str(image.get("path") or image.get("url")))
                )
        if pieces:
            session.records.append(
                record("user", "\n\n".join(pieces), {**src, "model": model} if model else src)
            )
        else:
            session.skipped["empty user bubble"] += 1
        return
    if kind != 2:
        session.skipped[f"bubble type {kind}"] += 1
        return
    pieces = []
    thinking = bubble.get("thinking")
    if isinstance(thinking, dict) and isinstance(thinking.get("text"), str):
        part = thinking_part(thinking["text"], drop_thinking, session)
        pieces += [part] if part is not None else []
    if text:
        pieces.append(text)
    tool = bubble.get("toolFormerData")
    call_id = None
    if isinstance(tool, dict) and isinstance(tool.get("name"), str):
        call_id = str(tool.get("toolCallId") or f"{src.get('bubble_id')}")
        names[call_id] = tool["name"]
        args = tool.get("rawArgs") or tool.get("params") or "{}"
        pieces.append(
            tool_call_text_from_json(tool["name"], args)
            if isinstance(args, str)
            else tool_call_text(tool["name"], args)
        )
    if not pieces:
        session.skipped["empty assistant bubble"] += 1
        return
    session.records.append(
        record("assistant", "\n\n".join(pieces), {**src, "call_ids": [call_id]} if call_id else src)
    )
    if call_id is not None and isinstance(tool, dict):
        _tool_result(tool, call_id, src, session)


def _tool_result(tool: dict, call_id: str, src: dict[str, Any], session: Session) -> None:
    status = tool.get("status")
    result = tool.get("result")
    source = {**src, "call_id": call_id, "tool": tool["name"]}
    if status == "error":
        source["is_error"] = True
    if result is None:
        if status == "error":
            session.records.append(record("tool_result", "", source))
        else:
            session.skipped[f"tool call {status or 'without result'}"] += 1
        return
    text = result if isinstance(result, str) else json_text.dumps(result)
    session.records.append(record("tool_result", text, source))


def _chat_tabs(data: Any, path: str) -> list[Session]:
    where = f"ItemTable[{CHATDATA}]"
    tabs = data.get("tabs") if isinstance(data, dict) else None
    if not isinstance(tabs, list):
        raise RecordError(path, None, f"{where}.tabs", "expected a list of chat tabs")
    sessions = []
    for i, tab in enumerate(tabs):
        if not isinstance(tab, dict) or not isinstance(tab.get("tabId"), str):
            raise RecordError(path, None, f"{where}.tabs[{i}].tabId", "missing")
        session = Session(tab["tabId"])
        for j, bubble in enumerate(tab.get("bubbles") or []):
            kind = bubble.get("type") if isinstance(bubble, dict) else None
            text = bubble.get("text") or bubble.get("rawText") if isinstance(bubble, dict) else None
            src = {"file": path, "tab": tab["tabId"], "index": j}
            if isinstance(bubble, dict) and isinstance(bubble.get("id"), str):
                src["bubble_id"] = bubble["id"]
            role = {"user": "user", "ai": "assistant"}.get(str(kind))
            if role is None:
                session.skipped[f"bubble type {kind}"] += 1
            elif not isinstance(text, str) or not text:
                session.skipped[f"empty {role} bubble"] += 1
            else:
                session.records.append(record(role, text, src))
        _first(session, title=tab.get("chatTitle"), updated=tab.get("lastSendTime"))
        sessions.append(session)
    return sessions


# ------------------------------------------------------------------ cursor-agent CLI


def _cli_chat(conn: sqlite3.Connection, path: str, drop_thinking: bool) -> Session:
    row = conn.execute("SELECT value FROM meta WHERE key = '0'").fetchone()
    if row is None:
        raise RecordError(path, None, "meta[0]", "missing: no chat metadata")
    try:
        raw = bytes.fromhex(row[0]) if isinstance(row[0], str) else bytes(row[0])
    except ValueError:
        raise RecordError(path, None, "meta[0]", "not hex-encoded JSON") from None
    meta = sqlite.json_value(path, "meta[0]", raw)
    if not isinstance(meta, dict) or not isinstance(meta.get("agentId"), str):
        raise RecordError(path, None, "meta[0].agentId", "missing")
    session = Session(meta["agentId"])
    root_id = meta.get("latestRootBlobId")
    if not isinstance(root_id, str) or not root_id:
        return session  # a chat opened and never sent
    root = conn.execute("SELECT data FROM blobs WHERE id = ?", (root_id,)).fetchone()
    if root is None:
        raise RecordError(path, None, f"blobs[{root_id}]", "the root blob is missing")
    names: dict[str, str] = {}
    for i, blob_id in enumerate(message_ids(bytes(root[0]), path, root_id)):
        blob = conn.execute("SELECT data FROM blobs WHERE id = ?", (blob_id,)).fetchone()
        if blob is None:
            session.skipped["missing blob"] += 1
            continue
        message = _json_or_none(bytes(blob[0]))
        if not isinstance(message, dict) or "role" not in message:
            session.skipped["non-JSON message blob"] += 1
            continue
        src = {"file": path, "agent": meta["agentId"], "blob": blob_id, "index": i}
        _cli_message(message, src, f"blobs[{blob_id}]", path, session, drop_thinking, names)
    _first(
        session,
        title=meta.get("name"),
        created=meta.get("createdAt"),
        model=meta.get("lastUsedModel"),
    )
    return session


def _json_or_none(data: bytes) -> Any:
    try:
        return json_text.loads(data)
    except (ValueError, RecordError):
        return None


def message_ids(root: bytes, path: str, root_id: str) -> list[str]:
    """The 32-byte ids in field 1 of the root blob's protobuf, in order, as hex."""
    ids: list[str] = []
    pos = 0
    while pos < len(root):
        key, pos = _varint(root, pos, path, root_id)
        field_no, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(root, pos, path, root_id)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(root, pos, path, root_id)
            value = root[pos : pos + size]
            pos += size
            if field_no == 1 and size == 32:
                ids.append(value.hex())
        else:
            raise RecordError(path, None, f"blobs[{root_id}]", f"unknown protobuf wire type {wire}")
        if pos > len(root):
            raise RecordError(path, None, f"blobs[{root_id}]", "the root blob is cut short")
    return ids


def _varint(data: bytes, pos: int, path: str, root_id: str) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise RecordError(path, None, f"blobs[{root_id}]", "the root blob is cut short")


def _cli_message(
    message: dict,
    src: dict[str, Any],
    where: str,
    path: str,
    session: Session,
    drop_thinking: bool,
    names: dict[str, str],
) -> None:
    role = message.get("role")
    content = message.get("content")
    if role not in ("system", "user", "assistant", "tool"):
        raise RecordError(path, None, f"{where}.role", f"unknown role {role!r}")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list):
        raise RecordError(path, None, f"{where}.content", "expected a string or a list of parts")
    pieces: list[str] = []
    call_ids: list[str] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if part.get("text"):
                pieces.append(str(part["text"]))
        elif kind == "reasoning":
            if (p := thinking_part(str(part.get("text", "")), drop_thinking, session)) is not None:
                pieces.append(p)
        elif kind == "tool-call":
            name = str(part.get("toolName"))
            call_id = str(part.get("toolCallId"))
            names[call_id] = name
            call_ids.append(call_id)
            pieces.append(tool_call_text(name, part.get("args", part.get("input", {}))))
        elif kind == "tool-result":
            call_id = str(part.get("toolCallId"))
            result = part.get("result", part.get("output"))
            source = {
                **src,
                "call_id": call_id,
                "tool": str(part.get("toolName") or names.get(call_id)),
            }
            if part.get("isError") is True:
                source["is_error"] = True
            text = result if isinstance(result, str) else json_text.dumps(result)
            session.records.append(record("tool_result", text, source))
        elif kind in ("image", "file"):
            pieces.append(f"[{kind}: {part.get('mediaType') or part.get('mimeType') or 'unknown'}]")
        else:
            session.skipped[f"part:{kind}"] += 1
    if pieces:
        out_role = "tool_result" if role == "tool" else role
        source = {**src, "call_ids": call_ids} if call_ids else src
        session.records.append(record(out_role, "\n\n".join(pieces), source))
    elif role != "tool" or not parts:
        session.skipped[f"empty {role} message"] += 1
