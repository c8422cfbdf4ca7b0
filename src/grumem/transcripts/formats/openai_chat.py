"""OpenAI chat messages: a JSON list of messages, or an object holding `messages`.

Roles: `system` and `developer` -> system, `user` -> user, `assistant` ->
assistant, `tool` and the legacy `function` -> tool_result. An assistant
message's `tool_calls` (function name, arguments as a JSON string) are shown
after its text, one `Tool call <name>: <arguments>` per call; a tool
message's source keeps its `tool_call_id` and the name of the call it
answers. Reasoning text some servers return (`reasoning_content`,
`reasoning`) is thinking: kept unless dropped. Images given as data URLs
and encrypted reasoning become one-line placeholders.

The content helpers here are shared with the SWE-agent and mini-swe-agent
readers, whose messages are this shape with extra fields.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    blob_placeholder,
    data_url_placeholder,
    is_not,
    load_json_document,
    record,
    require,
    session_stem,
    thinking_text,
    tool_call_text,
    tool_call_text_from_json,
)

NAME = "openai"
SUFFIXES = (".json",)
ROLE_MAP = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool_result",
    "function": "tool_result",
}


def _messages_of(doc: Any) -> list | None:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return doc["messages"]
    return None


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    messages = _messages_of(head.document)
    if messages is None:
        return NotThisFormat(is_not("the file", head.document, "a list of messages or {messages}"))
    if not messages:
        return NotThisFormat("the list of messages is empty")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return NotThisFormat(f"message [{i}] has no role string")
    return True


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    doc = load_json_document(path)
    messages = _messages_of(doc)
    if messages is None:
        raise RecordError(
            path, None, "messages", "expected a JSON list of messages or an object with 'messages'"
        )
    prefix = "" if isinstance(doc, list) else "messages"
    session = Session(session_stem(path, SUFFIXES))
    convert_messages(messages, prefix, path, drop_thinking, session)
    return [session]


def convert_messages(
    messages: list,
    prefix: str,
    path: str,
    drop_thinking: bool,
    session: Session,
    roles: Callable[[int, dict[str, Any]], dict[str, str] | None] | None = None,
) -> None:
    """Append the records of a file's chat messages to `session`: message i is at
    `{prefix}[i]` with the source {file, index: i}, and a tool's reply is named by
    the call it answers. `roles(i, message)`, called in order for each message
    object, gives its role map (default ROLE_MAP; None leaves the message out)."""
    tool_names: dict[str, str] = {}
    for i, msg in enumerate(messages):
        role_map = ROLE_MAP if roles is None or not isinstance(msg, dict) else roles(i, msg)
        if role_map is None:
            continue
        source = {"file": path, "index": i}
        records, skipped = session.records, session.skipped
        where = f"{prefix}[{i}]"
        convert_message(
            msg, where, path, source, drop_thinking, records, skipped, tool_names, role_map
        )


def convert_message(
    msg: Any,
    where: str,
    path: str,
    source: dict[str, Any],
    drop_thinking: bool,
    out: list[dict],
    skipped: Counter[str],
    tool_names: dict[str, str],
    role_map: dict[str, str] = ROLE_MAP,
) -> None:
    """Append the record(s) of one chat message to `out`; count what is left out."""
    if not isinstance(msg, dict):
        raise RecordError(path, None, where, "expected a message object")
    role_name = require(msg, "role", str, path, None, f"{where}.")
    if role_name not in role_map:
        raise RecordError(
            path,
            None,
            f"{where}.role",
            f"unknown role {role_name!r}; expected one of {', '.join(role_map)}",
        )
    role = role_map[role_name]
    parts: list[str] = []
    if role == "assistant":
        parts.extend(_reasoning_parts(msg, where, path, drop_thinking, skipped))
    text = content_text(msg.get("content"), f"{where}.content", path)
    if text:
        parts.append(text)
    if role == "assistant":
        calls, call_ids = tool_call_parts(msg, where, path, tool_names)
        parts.extend(calls)
        if call_ids:
            source = {**source, "tool_call_ids": call_ids}
        if isinstance(msg.get("refusal"), str) and msg["refusal"]:
            parts.append(f"Refusal: {msg['refusal']}")
    if role == "tool_result":
        source = {**source, **_answered_call(msg, where, path, tool_names)}
        out.append(record(role, text, source))  # an empty output is still the answer
        return
    if not parts:
        skipped[f"empty {role} message"] += 1
        return
    out.append(record(role, "\n\n".join(parts), source))


def content_text(content: Any, where: str, path: str) -> str:
    """Message content as the model saw it: a string, or parts joined by blank lines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RecordError(path, None, where, "expected a string, a list of parts, or null")
    pieces = []
    for j, part in enumerate(content):
        pwhere = f"{where}[{j}]."
        kind = require(part, "type", str, path, None, pwhere)
        if kind in ("text", "input_text", "output_text"):
            pieces.append(require(part, "text", str, path, None, pwhere))
        elif kind == "image_url":
            image = require(part, "image_url", (dict, str), path, None, pwhere)
            url = (
                image
                if isinstance(image, str)
                else require(image, "url", str, path, None, f"{pwhere}image_url.")
            )
            pieces.append(data_url_placeholder("image", url))
        elif kind == "input_audio":
            audio = require(part, "input_audio", dict, path, None, pwhere)
            data = require(audio, "data", str, path, None, f"{pwhere}input_audio.")
            pieces.append(blob_placeholder("audio", str(audio.get("format", "unknown")), data))
        elif kind == "refusal":
            pieces.append(f"Refusal: {require(part, 'refusal', str, path, None, pwhere)}")
        else:
            raise RecordError(path, None, f"{pwhere}type", f"unknown content part {kind!r}")
    return "\n\n".join(pieces)


def tool_call_parts(
    msg: dict, where: str, path: str, tool_names: dict[str, str]
) -> tuple[list[str], list[str]]:
    """`Tool call <name>: <arguments>` for each call of an assistant message (and the
    legacy single `function_call`), and the call ids; remembers each id's tool name so
    results can name the call they answer."""
    parts, ids = [], []
    calls = msg.get("tool_calls") or []
    if not isinstance(calls, list):
        raise RecordError(path, None, f"{where}.tool_calls", "expected a list")
    for j, call in enumerate(calls):
        cwhere = f"{where}.tool_calls[{j}]."
        function = require(call, "function", dict, path, None, cwhere)
        name = require(function, "name", str, path, None, f"{cwhere}function.")
        arguments = require(function, "arguments", (str, dict), path, None, f"{cwhere}function.")
        if isinstance(call.get("id"), str):
            tool_names[call["id"]] = name
            ids.append(call["id"])
        parts.append(_call_text(name, arguments))
    if msg.get("function_call") is not None:
        function = require(msg, "function_call", dict, path, None, f"{where}.")
        name = require(function, "name", str, path, None, f"{where}.function_call.")
        arguments = require(
            function, "arguments", (str, dict), path, None, f"{where}.function_call."
        )
        parts.append(_call_text(name, arguments))
    return parts, ids


def _call_text(name: str, arguments: str | dict) -> str:
    if isinstance(arguments, dict):
        return tool_call_text(name, arguments)
    return tool_call_text_from_json(name, arguments)


def _answered_call(msg: dict, where: str, path: str, tool_names: dict[str, str]) -> dict:
    """The source fields that pair a tool message with its call."""
    ids = msg.get("tool_call_ids")  # SWE-agent: a list
    if ids is None and msg.get("tool_call_id") is not None:
        ids = [msg["tool_call_id"]]
    if ids is None:
        return {"tool": msg["name"]} if isinstance(msg.get("name"), str) else {}
    if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
        raise RecordError(path, None, f"{where}.tool_call_id", "expected a string (or strings)")
    out: dict[str, Any] = {"tool_call_id": ids[0] if len(ids) == 1 else ids}
    names = [tool_names[x] for x in ids if x in tool_names]
    if names:
        out["tool"] = names[0] if len(names) == 1 else names
    return out


def _reasoning_parts(
    msg: dict, where: str, path: str, drop_thinking: bool, skipped: Counter[str]
) -> list[str]:
    parts = []
    for key in ("reasoning_content", "reasoning"):
        value = msg.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, dict) and isinstance(value.get("encrypted_content"), str):
            if drop_thinking:
                skipped["encrypted reasoning"] += 1
            else:
                parts.append(
                    blob_placeholder("encrypted reasoning", "encrypted", value["encrypted_content"])
                )
            continue
        if not isinstance(value, str):
            raise RecordError(path, None, f"{where}.{key}", "expected a string")
        if drop_thinking:
            skipped["thinking"] += 1
        else:
            parts.append(thinking_text(value))
    return parts
