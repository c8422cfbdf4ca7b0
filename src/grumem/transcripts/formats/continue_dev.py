"""Continue sessions (`~/.continue/sessions/<session id>.json`; `$CONTINUE_GLOBAL_DIR/sessions/`).

Read from continuedev/continue: `core/index.d.ts` (`Session`, `ChatHistoryItem`,
`ChatMessage`, `ToolCallState`), `core/util/history.ts` (`HistoryManager.save`)
and `core/util/paths.ts` (`getSessionFilePath`, `getSessionsListPath`), at
v0.8.68-vscode (18779eb, 2025-02) and v2.1.0-vscode (b238c1f, 2026-06), and the
`cn` CLI's `extensions/cli/src/session.ts` at d0a3c0b (2026-06). Every
version writes one object `{sessionId, title, workspaceDirectory, history,
mode?, chatModelTitle?, usage?}` per session; `history` is a list of
`{message: {role, content, ...}, contextItems, toolCallStates?, ...}`.

Two layouts of tool results:
- the VS Code and JetBrains extension (0.8 to 2.x) appends a history item of
  role `tool` (`{content, toolCallId}`) after the assistant item that called;
  0.8 and 1.0 keep one `toolCallState` per item, later versions a list
  `toolCallStates`;
- the `cn` CLI writes no `tool` items: each call's output stays in the
  assistant item's `toolCallStates[].output` (context items).
Both are read: a call answered by a `tool` item is read from it, in its place;
a call answered by nothing else is read from its state's output, right after
the assistant record. A call with neither is counted `tool call without
output`.

Roles: `user` -> user: the item's context items (files and the like, each its
`content`, as Continue's `constructMessages` prepends them), then the message
(text parts; an image is a one-line placeholder). `assistant` -> assistant:
the item's `reasoning` (`Thinking: `), the text, then one `Tool call <name>:
<arguments>` per tool call; its source names the call ids and the model
(`promptLogs`). `thinking` -> an assistant record `Thinking: <text>` (its
`redactedThinking` is never rendered, only counted). `tool` -> tool_result,
its source naming the call id, the tool and `is_error` when the call's state
is `errored`. `system` -> system. An item's `conversationSummary` (what the
model continues from after compaction) follows it as a system record. Other
roles are counted by name. Thinking is kept unless drop_thinking.

The session's title, workspace, mode and model go into the first record's
source (`session`). `sessions.json`, Continue's index of sessions (a list of
`{sessionId, title, dateCreated, workspaceDirectory}`), lies in the same
folder and is no session: it reads as one empty session, counted `session
index (not a session)`, so a glob of `sessions/*.json` chunks every session
and says what it left out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    data_url_placeholder,
    is_not,
    keep_session_info,
    load_json_document,
    record,
    require,
    thinking_part,
    tool_call_text_from_json,
)

NAME = "continue"
INDEX_NAME = "sessions.json"
LOCATIONS = (
    "${CONTINUE_GLOBAL_DIR}/sessions/*.json",
    "~/.continue/sessions/*.json",
)


def _is_session(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("sessionId"), str)
        and isinstance(doc.get("history"), list)
        and "workspaceDirectory" in doc
    )


def _is_index(path: str | os.PathLike[str], doc: Any) -> bool:
    return Path(path).name == INDEX_NAME and isinstance(doc, list)


def count_sessions(path: str | os.PathLike[str]) -> int:
    """`grumem discover`'s count, by the name alone: the index is no session."""
    return 0 if Path(path).name == INDEX_NAME else 1


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    doc = head.document
    if _is_session(doc) or _is_index(path, doc):
        return True
    return NotThisFormat(
        is_not("the file", doc, "a Continue session {sessionId, workspaceDirectory, history}")
    )


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    doc = load_json_document(path)
    if _is_index(path, doc):
        index = Session(Path(path).stem)
        index.skipped["session index (not a session)"] += 1
        return [index]
    if not isinstance(doc, dict):
        raise RecordError(path, None, None, "expected a Continue session object")
    session_id = require(doc, "sessionId", str, path, None)
    if not session_id:
        raise RecordError(path, None, "sessionId", "empty")
    history = require(doc, "history", list, path, None)
    session = Session(session_id)
    _History(path, history, drop_thinking, session).read()
    keep_session_info(
        session,
        {
            "title": doc.get("title"),
            "workspace": doc.get("workspaceDirectory"),
            "mode": doc.get("mode"),
            "model": doc.get("chatModelTitle"),
        },
    )
    return [session]


class _History:
    """One pass over a session's history items, remembering the calls made so far."""

    def __init__(self, path: str, history: list, drop_thinking: bool, session: Session):
        self.path = path
        self.history = history
        self.drop_thinking = drop_thinking
        self.session = session
        self.tool_names: dict[str, str] = {}
        self.states: dict[str, dict] = {}
        # calls a `tool` item answers: their answer is read there, not from the state
        self.answered = {
            item["message"]["toolCallId"]
            for item in history
            if isinstance(item, dict)
            and isinstance(item.get("message"), dict)
            and item["message"].get("role") == "tool"
            and isinstance(item["message"].get("toolCallId"), str)
        }

    def read(self) -> None:
        for i, item in enumerate(self.history):
            where = f"history[{i}]"
            if not isinstance(item, dict):
                raise RecordError(self.path, None, where, "expected a history item object")
            message = require(item, "message", dict, self.path, None, f"{where}.")
            role = require(message, "role", str, self.path, None, f"{where}.message.")
            source: dict[str, Any] = {"file": self.path, "index": i}
            if isinstance(message.get("id"), str):
                source["id"] = message["id"]
            before = (len(self.session.records), sum(self.session.skipped.values()))
            if role == "user":
                self._user(item, message, where, source)
            elif role == "assistant":
                self._assistant(item, message, where, source)
            elif role == "thinking":
                self._thinking(message, where, source)
            elif role == "tool":
                self._tool(message, where, source)
            elif role == "system":
                self._add("system", self._content(message, where), source)
            else:
                self.session.skipped[f"history item of role {role}"] += 1
            if (len(self.session.records), sum(self.session.skipped.values())) == before:
                self.session.skipped[f"empty {role} message"] += 1
            summary = item.get("conversationSummary")
            if isinstance(summary, str) and summary:
                self._add("system", summary, {**source, "conversation_summary": True})

    def _add(self, role: str, text: str, source: dict[str, Any]) -> None:
        if text:
            self.session.records.append(record(role, text, source))

    def _content(self, message: dict, where: str) -> str:
        """A MessageContent: a string, or text and imageUrl parts joined by a blank line."""
        content = message.get("content", "")
        if isinstance(content, str):
            return content
        if not isinstance(content, list):
            raise RecordError(
                self.path, None, f"{where}.message.content", "expected a string or a list of parts"
            )
        pieces = []
        for j, part in enumerate(content):
            pwhere = f"{where}.message.content[{j}]."
            kind = require(part, "type", str, self.path, None, pwhere)
            if kind == "text":
                pieces.append(require(part, "text", str, self.path, None, pwhere))
            elif kind == "imageUrl":
                image = require(part, "imageUrl", dict, self.path, None, pwhere)
                url = require(image, "url", str, self.path, None, f"{pwhere}imageUrl.")
                pieces.append(data_url_placeholder("image", url))
            else:
                raise RecordError(self.path, None, f"{pwhere}type", f"unknown part {kind!r}")
        return "\n\n".join(p for p in pieces if p)

    def _user(self, item: dict, message: dict, where: str, source: dict[str, Any]) -> None:
        context = item.get("contextItems") or []
        if not isinstance(context, list):
            raise RecordError(self.path, None, f"{where}.contextItems", "expected a list")
        parts = []
        for j, ctx in enumerate(context):
            text = require(ctx, "content", str, self.path, None, f"{where}.contextItems[{j}].")
            if text.strip():
                parts.append(text)
        parts.append(self._content(message, where))
        self._add("user", "\n\n".join(p for p in parts if p), source)

    def _thinking_text(self, text: str) -> str | None:
        return thinking_part(text, self.drop_thinking, self.session)

    def _assistant(self, item: dict, message: dict, where: str, source: dict[str, Any]) -> None:
        parts: list[str] = []
        reasoning = item.get("reasoning")
        text = reasoning.get("text") if isinstance(reasoning, dict) else None
        if isinstance(text, str) and (part := self._thinking_text(text)) is not None:
            parts.append(part)
        parts.append(self._content(message, where))
        states = _states_of(item, where, self.path)
        calls = message.get("toolCalls")
        if calls is None:  # an older item keeps its calls in its states only
            calls = [s.get("toolCall") for s in states]
        if not isinstance(calls, list):
            raise RecordError(self.path, None, f"{where}.message.toolCalls", "expected a list")
        ids = []
        for j, call in enumerate(calls):
            cwhere = f"{where}.message.toolCalls[{j}]."
            function = require(call, "function", dict, self.path, None, cwhere)
            name = require(function, "name", str, self.path, None, f"{cwhere}function.")
            arguments = function.get("arguments") or "{}"
            if not isinstance(arguments, str):
                raise RecordError(
                    self.path, None, f"{cwhere}function.arguments", "expected a string"
                )
            parts.append(tool_call_text_from_json(name, arguments))
            if isinstance(call.get("id"), str):
                ids.append(call["id"])
                self.tool_names[call["id"]] = name
        if ids:
            source = {**source, "tool_call_ids": ids}
        model = _model_of(item)
        if model is not None:
            source = {**source, "model": model}
        self._add("assistant", "\n\n".join(p for p in parts if p), source)
        for k, state in enumerate(states):
            call_id = require(state, "toolCallId", str, self.path, None, f"{where}.states[{k}].")
            self.states[call_id] = state
            if call_id not in self.answered:
                self._output_of_state(state, call_id, source)

    def _output_of_state(self, state: dict, call_id: str, source: dict[str, Any]) -> None:
        """A call the CLI answered in its state: the output's context items, as the
        model was sent them."""
        output = state.get("output")
        if not isinstance(output, list) or not output:
            self.session.skipped["tool call without output"] += 1
            return
        text = "\n\n".join(str(o.get("content", "")) for o in output if isinstance(o, dict))
        src = {"file": source["file"], "index": source["index"], **self._call_source(call_id)}
        self.session.records.append(record("tool_result", text, src))

    def _call_source(self, call_id: str) -> dict[str, Any]:
        out: dict[str, Any] = {"tool_call_id": call_id}
        if call_id in self.tool_names:
            out["tool"] = self.tool_names[call_id]
        status = self.states.get(call_id, {}).get("status")
        if isinstance(status, str):
            out["status"] = status
            if status == "errored":
                out["is_error"] = True
        return out

    def _thinking(self, message: dict, where: str, source: dict[str, Any]) -> None:
        if isinstance(message.get("redactedThinking"), str) and message["redactedThinking"]:
            self.session.skipped["redacted thinking"] += 1
        text = self._content(message, where)
        if text and (part := self._thinking_text(text)) is not None:
            self._add("assistant", part, source)

    def _tool(self, message: dict, where: str, source: dict[str, Any]) -> None:
        call_id = require(message, "toolCallId", str, self.path, None, f"{where}.message.")
        text = self._content(message, where)
        # an empty output is still the answer
        self.session.records.append(
            record("tool_result", text, {**source, **self._call_source(call_id)})
        )


def _states_of(item: dict, where: str, path: str) -> list[dict]:
    """The item's tool call states: `toolCallStates` (1.1 on), or the one `toolCallState`."""
    states = item.get("toolCallStates")
    if states is None:
        single = item.get("toolCallState")
        states = [] if single is None else [single]
    if not isinstance(states, list) or not all(isinstance(s, dict) for s in states):
        raise RecordError(path, None, f"{where}.toolCallStates", "expected a list of objects")
    return states


def _model_of(item: dict) -> str | None:
    logs = item.get("promptLogs")
    if isinstance(logs, list) and logs and isinstance(logs[-1], dict):
        title = logs[-1].get("modelTitle")
        return title if isinstance(title, str) else None
    return None
