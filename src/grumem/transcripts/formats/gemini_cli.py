"""Gemini CLI saved chats (`~/.gemini/tmp/<project_hash>/chats/session-*.json` or `.jsonl`).

Read from gemini-cli's ChatRecordingService (packages/core/src/services/
chatRecordingService.ts and chatRecordingTypes.ts). Two shapes, one Session
named by `sessionId` each:
- the JSON session file of gemini-cli 0.x (2025): one object `{sessionId,
  projectHash, startTime, lastUpdated, messages, summary?}`;
- the JSON Lines session log of the 2026 releases: a metadata line
  `{sessionId, projectHash, ...}`, then one line per message written, plus
  `{"$set": {...}}` and `{"$rewindTo": <message id>}` lines. It is replayed
  as gemini-cli resumes it: a message written again under the same id (its
  tool calls completed, its tokens counted) is a duplicated payload, and
  the last version is read in the place of the first; a rewind removes the
  message and everything after it (counted as `rewound message`: the user
  took them back); a `$set` of `messages` replaces the list. Errors name
  the line.

Each message has `id`, `timestamp`, `type` and `content`:
- `user` -> user. `gemini` -> assistant: its `thoughts` first (each
  `{subject, description}` is one `Thinking: <subject>: <description>`
  part, kept unless drop_thinking, then counted as `thinking`), then the
  content, then one `Tool call <name>: <args>` per entry of `toolCalls`.
  Each tool call's `result` follows as a tool_result record whose source
  names the call id, the tool and its status; a call without a result
  (cancelled before it ran) falls back to its `resultDisplay` text, or is
  counted as `tool call without result`.
- `info`, `warning`, `error` are what the CLI printed (a cancelled request,
  an API error): the model never saw them, but they tell what happened, so
  they are kept as system records.
- `content` (and a tool result) is a string or Gemini API parts: `text`
  (a part marked `thought` is thinking), `functionCall`, `functionResponse`
  (its `response.output`, or `response.error`, or the response as JSON),
  `inlineData` (a one-line placeholder), `fileData` (its URI). Several
  parts are joined by a blank line. `displayContent` is what the UI showed
  instead; the model saw `content`, so `content` is kept.
- `tokens`, `model` and the session metadata are bookkeeping, not text.
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
    iter_json_objects,
    load_json_document,
    record,
    require,
    thinking_text,
    tool_call_text,
)

NAME = "gemini-cli"
# Where `grumem discover` looks (grumem.core.locations): a directory per project
# hash; `.json` and the 2026 releases' `.jsonl`
LOCATIONS = ("~/.gemini/tmp/*/chats/session-*.json*",)
ROLE_MAP = {
    "user": "user",
    "gemini": "assistant",
    "info": "system",
    "warning": "system",
    "error": "system",
}


def _is_metadata(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("sessionId"), str)
        and isinstance(obj.get("projectHash"), str)
    )


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    first = head.first_line
    if _is_metadata(first) and "messages" not in first:
        return True  # the JSON Lines session file
    doc = head.document
    if _is_metadata(doc) and isinstance(doc.get("messages"), list):
        return True
    return NotThisFormat(
        "neither a first line nor the document is {sessionId, projectHash, ...} session metadata"
    )


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    first = Head(path).first_line
    if _is_metadata(first) and "messages" not in first:
        return [_read_jsonl(path, drop_thinking)]
    doc = load_json_document(path)
    if not isinstance(doc, dict):
        raise RecordError(
            path, None, None, "expected a JSON object with 'sessionId' and 'messages'"
        )
    session_id = require(doc, "sessionId", str, path, None)
    if not session_id:
        raise RecordError(path, None, "sessionId", "empty")
    messages = require(doc, "messages", list, path, None)
    session = Session(session_id)
    for i, msg in enumerate(messages):
        _convert(msg, f"messages[{i}]", i, path, drop_thinking, session)
    return [session]


def _read_jsonl(path: str, drop_thinking: bool) -> Session:
    """Replay the session log as gemini-cli's loadConversationRecord does: a message
    line written again under the same id replaces the earlier one in its place, a
    `$rewindTo` line removes that message and all after it, and a `$set` line of
    `messages` replaces the whole list."""
    meta: dict[str, Any] = {}
    current: dict[str, tuple[int, dict]] = {}  # id -> (line, message), in first-seen order
    replaced: list[tuple[int, dict]] | None = None
    rewound = 0
    for line, obj in iter_json_objects(path):
        if isinstance(obj.get("$rewindTo"), str):
            ids = list(current)
            cut = ids.index(obj["$rewindTo"]) if obj["$rewindTo"] in ids else 0
            for key in ids[cut:]:
                del current[key]
            rewound += len(ids) - cut
        elif isinstance(obj.get("id"), str):
            current[obj["id"]] = (line, obj)
        elif isinstance(obj.get("$set"), dict):
            update = obj["$set"]
            meta.update(update)
            if isinstance(update.get("messages"), list) and update["messages"]:
                replaced = [(line, m) for m in update["messages"]]
        elif _is_metadata(obj):
            meta.update(obj)
        else:
            raise RecordError(
                path,
                line,
                None,
                "expected session metadata, a message (with 'id'), '$set' or '$rewindTo'",
            )
    session_id = meta.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise RecordError(path, 1, "sessionId", "missing: no session metadata line")
    session = Session(session_id)
    messages = replaced if replaced is not None else list(current.values())
    for i, (line, msg) in enumerate(messages):
        try:
            _convert(msg, "", i, path, drop_thinking, session)
        except RecordError as e:
            field = e.field.lstrip(".") if e.field else None
            raise RecordError(path, line, field or None, e.why) from None
    if rewound:
        session.skipped["rewound message"] += rewound
    return session


def _convert(
    msg: Any, where: str, index: int, path: str, drop_thinking: bool, session: Session
) -> None:
    if not isinstance(msg, dict):
        raise RecordError(path, None, where, "expected a message object")
    kind = require(msg, "type", str, path, None, f"{where}.")
    if kind not in ROLE_MAP:
        raise RecordError(
            path,
            None,
            f"{where}.type",
            f"unknown type {kind!r}; expected one of {', '.join(ROLE_MAP)}",
        )
    role = ROLE_MAP[kind]
    if "content" not in msg:
        raise RecordError(path, None, f"{where}.content", "missing")
    source: dict[str, Any] = {"file": path, "index": index}
    if isinstance(msg.get("id"), str):
        source["id"] = msg["id"]
    if role == "system":
        source["type"] = kind
    parts: list[str] = []
    if kind == "gemini":
        parts.extend(_thoughts(msg, where, path, drop_thinking, session))
    parts.extend(_parts_text(msg["content"], f"{where}.content", path, drop_thinking, session))
    calls = (msg.get("toolCalls") or []) if kind == "gemini" else []
    if not isinstance(calls, list):
        raise RecordError(path, None, f"{where}.toolCalls", "expected a list")
    results = []
    for j, call in enumerate(calls):
        cwhere = f"{where}.toolCalls[{j}]."
        name = require(call, "name", str, path, None, cwhere)
        args = require(call, "args", dict, path, None, cwhere)
        parts.append(tool_call_text(name, args))
        results.append((j, call, name))
    ids = [c["id"] for c in calls if isinstance(c.get("id"), str)]
    if ids:
        source["tool_call_ids"] = ids
    if parts:
        session.records.append(record(role, "\n\n".join(parts), source))
    else:
        session.skipped[f"empty {kind} message"] += 1
    for j, call, name in results:
        _tool_result(call, name, f"{where}.toolCalls[{j}]", index, path, drop_thinking, session)


def _thoughts(msg: dict, where: str, path: str, drop_thinking: bool, session: Session) -> list[str]:
    thoughts = msg.get("thoughts") or []
    if not isinstance(thoughts, list):
        raise RecordError(path, None, f"{where}.thoughts", "expected a list")
    out = []
    for j, t in enumerate(thoughts):
        twhere = f"{where}.thoughts[{j}]."
        subject = require(t, "subject", str, path, None, twhere)
        description = require(t, "description", str, path, None, twhere)
        if drop_thinking:
            session.skipped["thinking"] += 1
            continue
        text = f"{subject}: {description}" if subject and description else subject or description
        if text:
            out.append(thinking_text(text))
    return out


def _tool_result(
    call: dict, name: str, where: str, index: int, path: str, drop_thinking: bool, session: Session
) -> None:
    source: dict[str, Any] = {"file": path, "index": index, "tool": name}
    if isinstance(call.get("id"), str):
        source["tool_call_id"] = call["id"]
    if isinstance(call.get("status"), str):
        source["status"] = call["status"]
    result = call.get("result")
    if result is not None:
        text = "\n\n".join(_parts_text(result, f"{where}.result", path, drop_thinking, session))
    elif isinstance(call.get("resultDisplay"), str):
        text = call["resultDisplay"]
    else:
        session.skipped["tool call without result"] += 1
        return
    session.records.append(record("tool_result", text, source))  # empty output is the answer


def _parts_text(
    content: Any, where: str, path: str, drop_thinking: bool, session: Session
) -> list[str]:
    """The texts of a PartListUnion: a string, one part, or a list of strings and parts."""
    if isinstance(content, str):
        return [content] if content else []
    items = content if isinstance(content, list) else [content]
    out = []
    for j, part in enumerate(items):
        pwhere = f"{where}[{j}]" if isinstance(content, list) else where
        text = _part_text(part, pwhere, path, drop_thinking, session)
        if text:
            out.append(text)
    return out


def _part_text(part: Any, where: str, path: str, drop_thinking: bool, session: Session) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise RecordError(path, None, where, "expected a string or a part object")
    if "text" in part:
        text = require(part, "text", str, path, None, f"{where}.")
        if part.get("thought") is True:
            if drop_thinking:
                session.skipped["thinking"] += 1
                return ""
            return thinking_text(text)
        return text
    if "functionCall" in part:
        call = require(part, "functionCall", dict, path, None, f"{where}.")
        name = require(call, "name", str, path, None, f"{where}.functionCall.")
        return tool_call_text(name, call.get("args", {}))
    if "functionResponse" in part:
        response = require(part, "functionResponse", dict, path, None, f"{where}.")
        body = response.get("response")
        if isinstance(body, dict) and isinstance(body.get("output"), str):
            return body["output"]
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return body["error"]
        return dumps(body) if body is not None else ""
    if "inlineData" in part:
        blob = require(part, "inlineData", dict, path, None, f"{where}.")
        data = require(blob, "data", str, path, None, f"{where}.inlineData.")
        return blob_placeholder("inline data", str(blob.get("mimeType", "unknown")), data)
    if "fileData" in part:
        ref = require(part, "fileData", dict, path, None, f"{where}.")
        uri = require(ref, "fileUri", str, path, None, f"{where}.fileData.")
        return f"[file: {ref.get('mimeType', 'unknown')}, {uri}]"
    raise RecordError(
        path,
        None,
        where,
        "unknown part: expected text, functionCall, functionResponse, inlineData or fileData",
    )
