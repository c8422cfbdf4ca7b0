"""GitHub Copilot CLI sessions (`~/.copilot/session-state/<session id>/events.jsonl`).

Read from the session event schema the CLI publishes
(`@github/copilot/session-events.schema.json`), as github/copilot-sdk
generates it into `nodejs/src/generated/session-events.ts`: at 088fc1c
(2026-01-14, CLI 0.0.382), where a subagent's events carry
`data.parentToolCallId`, and at cc0438d (2026-08-21, CLI 1.0.81), where they
carry `agentId` (parentToolCallId kept, deprecated). Older CLIs (2025) wrote
the same events to `~/.copilot/session-state/<session id>.jsonl`. `COPILOT_HOME`
moves `~/.copilot` (GitHub's Copilot CLI reference, where it replaces `--config-dir`).

Each line is an event `{type, data, id, timestamp, parentId, agentId?}`:
- `session.start`: the session id (`data.sessionId`), CLI version, selected
  model, working directory; no text.
- `user.message` -> user record (`content`, what the user typed; the
  `transformedContent` the CLI sends repeats it with its own context).
- `system.message` -> system record.
- `assistant.reasoning` -> an assistant record `Thinking: <content>` (kept
  unless drop_thinking). `assistant.message` -> assistant record: its
  `reasoningText` when no `assistant.reasoning` came before it, its content,
  then one `Tool call <name>: <arguments>` per `toolRequests` entry; its
  source names the model and the call ids.
- `tool.execution_complete` -> tool_result record: `result.content` (what the
  model was sent; `detailedContent` is the UI's) or `error.message`
  (`is_error`); its source names the call id and the tool.
- `session.compaction_complete` with a `summaryContent` -> system record (the
  model continues from it). `session.error` -> system record (what
  happened).
- Everything else (`tool.execution_start`, which repeats the tool request,
  turn and usage events, title and model changes, hooks, permissions, ...)
  is counted by type. Ephemeral events (deltas) are not written to the file.

Subagents: events of a subagent (an `agentId`, or in older files a
`parentToolCallId`) form a session of their own, `<session id>-agent-<agent
id or parent call id>`; the main session keeps the call that started it and
its result. The session's title (the last `session.title_changed`), start
time, CLI version, model and working directory go into the first record's
source (`session`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grumem.core.json_text import dumps
from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    is_not,
    iter_json_objects,
    keep_session_info,
    record,
    require,
    thinking_part,
    tool_call_text,
)

NAME = "copilot-cli"
LOCATIONS = (
    "~/.copilot/session-state/*/events.jsonl",
    "~/.copilot/session-state/*.jsonl",
    "${COPILOT_HOME}/session-state/*/events.jsonl",
    "${COPILOT_HOME}/session-state/*.jsonl",
)
MAIN = ""


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    obj = head.first_line
    if not isinstance(obj, dict):
        return NotThisFormat(is_not("the first line", obj, "a JSON object"))
    kind, data = obj.get("type"), obj.get("data")
    if not (isinstance(kind, str) and isinstance(data, dict) and "parentId" in obj):
        return NotThisFormat("the first line is not a Copilot CLI event {type, data, parentId}")
    if "." not in kind:
        return NotThisFormat(f"the first line's type {kind!r} is no Copilot CLI event type")
    return True


@dataclass
class _Agent:
    """One conversation of the file: the main agent's, or one subagent's."""

    records: list[dict] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    reasoned: bool = False  # an assistant.reasoning since the last message


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    agents: dict[str, _Agent] = {MAIN: _Agent()}
    tool_names: dict[str, str] = {}
    info: dict[str, Any] = {}
    for line, event in iter_json_objects(path):
        kind = require(event, "type", str, path, line)
        data = require(event, "data", dict, path, line)
        key = _agent_key(event, data, path, line)
        agent = agents.setdefault(key, _Agent())
        source: dict[str, Any] = {"file": path, "line": line}
        if isinstance(event.get("timestamp"), str):
            source["timestamp"] = event["timestamp"]
        scratch = Session("", agent.records, agent.skipped)
        if kind == "session.start":
            info.update(
                session_id=data.get("sessionId"),
                started=data.get("startTime"),
                version=data.get("copilotVersion"),
                model=data.get("selectedModel"),
                cwd=(data.get("context") or {}).get("cwd"),
            )
            agent.skipped[kind] += 1
        elif kind == "session.title_changed":
            info["title"] = data.get("title")
            agent.skipped[kind] += 1
        elif kind == "user.message":
            text = require(data, "content", str, path, line, "data.")
            _add(agent, "user", text, source, kind)
        elif kind == "system.message":
            text = require(data, "content", str, path, line, "data.")
            _add(agent, "system", text, {**source, "type": data.get("role", "system")}, kind)
        elif kind == "assistant.reasoning":
            text = require(data, "content", str, path, line, "data.")
            part = thinking_part(text, drop_thinking, scratch)
            if part is not None:
                _add(agent, "assistant", part, source, kind)
            agent.reasoned = True
        elif kind == "assistant.message":
            _assistant(agent, data, source, path, line, drop_thinking, scratch, tool_names)
        elif kind == "tool.execution_complete":
            _tool_result(agent, data, source, path, line, tool_names)
        elif kind == "session.compaction_complete" and isinstance(data.get("summaryContent"), str):
            _add(agent, "system", data["summaryContent"], {**source, "type": kind}, kind)
        elif kind == "session.error":
            text = require(data, "message", str, path, line, "data.")
            _add(agent, "system", text, {**source, "type": kind}, kind)
        else:
            agent.skipped[kind] += 1
    session_id = info.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        session_id = (
            Path(path).parent.name if Path(path).name == "events.jsonl" else Path(path).stem
        )
    sessions = []
    for key, agent in agents.items():
        sid = session_id if key == MAIN else f"{session_id}-agent-{key}"
        sessions.append(Session(sid, agent.records, agent.skipped))
    keep_session_info(
        sessions[0],
        {k: info.get(k) for k in ("title", "started", "version", "model", "cwd")},
    )
    return sessions


def _agent_key(event: dict, data: dict, path: str, line: int) -> str:
    for value, name in (
        (event.get("agentId"), "agentId"),
        (data.get("parentToolCallId"), "data.parentToolCallId"),
    ):
        if value is not None:
            if not isinstance(value, str) or not value:
                raise RecordError(path, line, name, "expected a non-empty string")
            return value
    return MAIN


def _add(agent: _Agent, role: str, text: str, source: dict[str, Any], kind: str) -> None:
    if text:
        agent.records.append(record(role, text, source))
    else:
        agent.skipped[f"empty {kind}"] += 1


def _assistant(
    agent: _Agent,
    data: dict,
    source: dict[str, Any],
    path: str,
    line: int,
    drop_thinking: bool,
    scratch: Session,
    tool_names: dict[str, str],
) -> None:
    parts: list[str] = []
    reasoning = data.get("reasoningText")
    if isinstance(reasoning, str) and reasoning and not agent.reasoned:
        part = thinking_part(reasoning, drop_thinking, scratch)
        if part is not None:
            parts.append(part)
    agent.reasoned = False
    content = require(data, "content", str, path, line, "data.")
    if content:
        parts.append(content)
    requests = data.get("toolRequests") or []
    if not isinstance(requests, list):
        raise RecordError(path, line, "data.toolRequests", "expected a list")
    ids = []
    for j, req in enumerate(requests):
        where = f"data.toolRequests[{j}]."
        name = require(req, "name", str, path, line, where)
        call_id = require(req, "toolCallId", str, path, line, where)
        tool_names[call_id] = name
        ids.append(call_id)
        parts.append(tool_call_text(name, req.get("arguments", {})))
    src = dict(source)
    if isinstance(data.get("messageId"), str):
        src["message_id"] = data["messageId"]
    if isinstance(data.get("model"), str):
        src["model"] = data["model"]
    if ids:
        src["tool_call_ids"] = ids
    _add(agent, "assistant", "\n\n".join(parts), src, "assistant.message")


def _tool_result(
    agent: _Agent,
    data: dict,
    source: dict[str, Any],
    path: str,
    line: int,
    tool_names: dict[str, str],
) -> None:
    call_id = require(data, "toolCallId", str, path, line, "data.")
    src: dict[str, Any] = {**source, "tool_call_id": call_id}
    if call_id in tool_names:
        src["tool"] = tool_names[call_id]
    result, error = data.get("result"), data.get("error")
    if isinstance(result, dict) and "content" in result:
        content = result["content"]
        text = content if isinstance(content, str) else dumps(content)
    elif isinstance(error, dict) and isinstance(error.get("message"), str):
        text = error["message"]
    else:
        agent.skipped["tool result without output"] += 1
        return
    if data.get("success") is False:
        src["is_error"] = True
    agent.records.append(record("tool_result", text, src))
