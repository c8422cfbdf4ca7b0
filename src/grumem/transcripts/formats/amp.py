"""Amp threads (`~/.local/share/amp/threads/T-<uuid>.json`; `$XDG_DATA_HOME/amp/threads/`).

Amp's source is not public: the thread file was read from public readers of
it, which agree on its shape: cross_agent_session_resumer
(`src/providers/amp.rs` at ec0eab9, 2026) and cli-continues
(`src/parsers/amp.ts` at 1db3105, 2026), with the layout notes of
noamsto/houston (`docs/AMP_AGENT_SUPPORT.md`). Older builds of the VS Code
extension kept the same files under `<globalStorage>/sourcegraph.amp/
threads3/`, which newer builds migrate.

One object per thread: `{v, id, created, title?, agentMode?, env: {initial:
{trees, platform, tags}}, messages, usageLedger?}`. A message is `{role,
messageId, content, meta?: {sentAt}, state?, usage?: {model, ...}}`, content
blocks close to Anthropic's:
- `user`: `text` -> user record; `tool_result` (`toolUseID`, `run: {status,
  result | progress | error}`) -> a tool_result record whose source names the
  call, the tool and its status (`is_error` when `error`, `cancelled` or
  `rejected-by-user`); a result that is not a string is its JSON. A run
  with neither result, progress nor error is counted `tool result without
  output`.
- `assistant`: `thinking` (`Thinking: `, kept unless drop_thinking),
  `redacted_thinking` (counted, never rendered), `text`, `tool_use` (`Tool
  call <name>: <input>`) -> one assistant record, blocks joined by a blank
  line; its source names the model (`usage.model`) and the call ids.
- `info`: what Amp told the model between turns: `summary` blocks (the
  summary a compacted thread continues from) and text -> a system record.
- `image` blocks are one-line placeholders. Block types and roles this reader
  does not know are counted by name (`block <type>`, `message of role <r>`).

The thread's title, creation time, agent mode, workspace (the first tree's
URI) and model tag go into the first record's source (`session`). Subagents
(the Task tool) run inside a tool call: what they did is their tool result.
"""

from __future__ import annotations

import os
from typing import Any

from grumem.core.json_text import dumps
from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    blob_placeholder,
    is_not,
    keep_session_info,
    load_json_document,
    record,
    require,
    thinking_part,
    tool_call_text,
)

NAME = "amp"
LOCATIONS = (
    "{XDG_DATA_HOME}/amp/threads/T-*.json",
    "{VSCODE_USER}/globalStorage/sourcegraph.amp/threads3/T-*.json",
)
FAILED = frozenset({"error", "cancelled", "rejected-by-user"})


def _is_thread(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("id"), str)
        and doc["id"].startswith("T-")
        and isinstance(doc.get("messages"), list)
        and "created" in doc
    )


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    if _is_thread(head.document):
        return True
    return NotThisFormat(
        is_not("the file", head.document, "an Amp thread {id: 'T-...', created, messages}")
    )


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    doc = load_json_document(path)
    if not _is_thread(doc):
        raise RecordError(path, None, None, "expected an Amp thread {id: 'T-...', created, ...}")
    session = Session(doc["id"])
    tool_names: dict[str, str] = {}
    for i, msg in enumerate(doc["messages"]):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise RecordError(path, None, where, "expected a message object")
        role = require(msg, "role", str, path, None, f"{where}.")
        content = require(msg, "content", (list, str), path, None, f"{where}.")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        source = _source(path, i, msg)
        before = (len(session.records), sum(session.skipped.values()))
        if role == "assistant":
            _assistant(blocks, where, path, source, drop_thinking, session, tool_names)
        elif role in ("user", "info"):
            _user_or_info(role, blocks, where, path, source, session, tool_names)
        else:
            session.skipped[f"message of role {role}"] += 1
        if (len(session.records), sum(session.skipped.values())) == before:
            session.skipped[f"empty {role} message"] += 1
    keep_session_info(session, _thread_info(doc))
    return [session]


def _source(path: str, index: int, msg: dict) -> dict[str, Any]:
    source: dict[str, Any] = {"file": path, "index": index}
    if isinstance(msg.get("messageId"), int):
        source["message_id"] = msg["messageId"]
    meta = msg.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("sentAt"), int):
        source["timestamp"] = meta["sentAt"]
    usage = msg.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("model"), str):
        source["model"] = usage["model"]
    return source


def _thread_info(doc: dict) -> dict[str, Any]:
    initial = (doc.get("env") or {}).get("initial") or {}
    trees = initial.get("trees") if isinstance(initial, dict) else None
    tree = trees[0] if isinstance(trees, list) and trees and isinstance(trees[0], dict) else {}
    tags = initial.get("tags") if isinstance(initial, dict) else None
    model = next(
        (t[len("model:") :] for t in tags or [] if isinstance(t, str) and t.startswith("model:")),
        None,
    )
    return {
        "title": doc.get("title"),
        "created": doc.get("created"),
        "agent_mode": doc.get("agentMode"),
        "workspace": tree.get("uri"),
        "model": model,
    }


def _image(block: dict, path: str, where: str) -> str:
    src = block.get("source")
    if isinstance(src, dict) and isinstance(src.get("data"), str):
        kind = src.get("mediaType", src.get("media_type", "unknown"))
        return blob_placeholder("image", str(kind), src["data"])
    raise RecordError(path, None, f"{where}.source", "expected an image source with data")


def _assistant(
    blocks: list,
    where: str,
    path: str,
    source: dict[str, Any],
    drop_thinking: bool,
    session: Session,
    tool_names: dict[str, str],
) -> None:
    parts: list[str] = []
    ids: list[str] = []
    for j, block in enumerate(blocks):
        bwhere = f"{where}.content[{j}]"
        kind = require(block, "type", str, path, None, f"{bwhere}.")
        if kind == "text":
            text = require(block, "text", str, path, None, f"{bwhere}.")
            if text:
                parts.append(text)
        elif kind == "thinking":
            text = require(block, "thinking", str, path, None, f"{bwhere}.")
            if (part := thinking_part(text, drop_thinking, session)) is not None:
                parts.append(part)
        elif kind == "redacted_thinking":
            session.skipped["redacted_thinking"] += 1
        elif kind == "tool_use":
            name = require(block, "name", str, path, None, f"{bwhere}.")
            call_id = require(block, "id", str, path, None, f"{bwhere}.")
            tool_names[call_id] = name
            ids.append(call_id)
            parts.append(tool_call_text(name, block.get("input", {})))
        elif kind == "image":
            parts.append(_image(block, path, bwhere))
        else:
            session.skipped[f"block {kind}"] += 1
    if parts:
        src = {**source, "tool_use_ids": ids} if ids else source
        session.records.append(record("assistant", "\n\n".join(parts), src))


def _user_or_info(
    role: str,
    blocks: list,
    where: str,
    path: str,
    source: dict[str, Any],
    session: Session,
    tool_names: dict[str, str],
) -> None:
    pending: list[str] = []
    kind_of_record = "user" if role == "user" else "system"

    def flush() -> None:
        if pending:
            session.records.append(record(kind_of_record, "\n\n".join(pending), source))
            pending.clear()

    for j, block in enumerate(blocks):
        bwhere = f"{where}.content[{j}]"
        kind = require(block, "type", str, path, None, f"{bwhere}.")
        if kind == "text":
            text = require(block, "text", str, path, None, f"{bwhere}.")
            if text:
                pending.append(text)
        elif kind == "image":
            pending.append(_image(block, path, bwhere))
        elif kind == "summary" and role == "info":
            summary = require(block, "summary", dict, path, None, f"{bwhere}.")
            if isinstance(summary.get("summary"), str):
                pending.append(summary["summary"])
            else:
                session.skipped[f"summary {summary.get('type')}"] += 1
        elif kind == "tool_result" and role == "user":
            flush()
            _tool_result(block, bwhere, path, source, session, tool_names)
        else:
            session.skipped[f"block {kind}"] += 1
    flush()


def _tool_result(
    block: dict,
    where: str,
    path: str,
    source: dict[str, Any],
    session: Session,
    tool_names: dict[str, str],
) -> None:
    call_id = require(block, "toolUseID", str, path, None, f"{where}.")
    run = require(block, "run", dict, path, None, f"{where}.")
    status = run.get("status")
    src: dict[str, Any] = {**source, "tool_use_id": call_id}
    if call_id in tool_names:
        src["tool"] = tool_names[call_id]
    if isinstance(status, str):
        src["status"] = status
        if status in FAILED:
            src["is_error"] = True
    for key in ("result", "error", "progress"):
        value = run.get(key)
        if value is None:
            continue
        if isinstance(value, dict) and key == "error" and isinstance(value.get("message"), str):
            value = value["message"]
        text = value if isinstance(value, str) else dumps(value)
        session.records.append(record("tool_result", text, src))
        return
    session.skipped["tool result without output"] += 1
