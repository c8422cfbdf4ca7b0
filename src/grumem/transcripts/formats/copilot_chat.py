"""GitHub Copilot Chat sessions (`<VS Code>/User/workspaceStorage/<hash>/chatSessions/<id>.jsonl`).

Read from microsoft/vscode: `chatSessionStore.ts` (where sessions are kept:
`workspaceStorage/<workspace id>/chatSessions/`, and for a window with no
folder `globalStorage/emptyWindowChatSessions/`), `objectMutationLog.ts` and
`chatSessionOperationLog.ts` (the `.jsonl` journal, storage schema version
3) at the index's versions of 2026 (objectMutationLog 047238f,
chatSessionOperationLog 03d4336), and the older whole-document `.json`
(`ISerializableChatData` v3, chatSessionStore 0392c00, 2025); and from
microsoft/vscode-copilot-chat 0.42.0 (31acd00, 2026-03) for what the Copilot
extension keeps of each answer: `result.metadata.toolCallRounds` (each model
response: `thinking`, `response` text, `toolCalls` `{id, name, arguments}`)
and `result.metadata.toolCallResults` (each call's LanguageModelToolResult).

The journal is replayed as VS Code reads it: line `{kind: 0, v}` is the
whole state; `{kind: 1, k, v}` sets the value at path `k`; `{kind: 2, k, v?,
i?}` cuts the array at `k` to length `i` (when given) and appends `v`; `{kind:
3, k}` deletes. The final state, like the `.json` file, is `{sessionId,
creationDate, customTitle?, responderUsername, requests: [...]}`.

Each request -> a user record (`message.text`), its source naming the
request id, timestamp and model (`modelId`). Its answer:
- with `toolCallRounds` (agent mode): each round is an assistant record
  (`Thinking: ` of its thinking unless drop_thinking, its response text, one
  `Tool call <name>: <arguments>` per call), followed by a tool_result
  record per call from `toolCallResults` (its text parts, joined by a blank
  line); a call with no recorded result is counted `tool result not
  recorded`, a result part that is not text (a prompt element tree) is
  counted `tool result part not text`;
- without: the response parts as the chat view shows them: markdown text
  (MarkdownString `value`, or `markdownContent`) and `thinking` parts, one
  assistant record. Tool invocations shown without rounds are counted
  (`toolInvocationSerialized`): their arguments and results are not
  recorded.
Every other response part kind (inline references, code block URIs, edit
groups, progress messages, confirmations, ...) is counted by kind: they are
the UI's, and the model's own text is the markdown. A request whose
response failed names it in its source (`error`). The session's title,
creation date and responder go into the first record's source (`session`).
Subagent turns (runSubagent) are inside their tool call's result.
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
    is_not,
    iter_json_objects,
    keep_session_info,
    load_json_document,
    record,
    require,
    thinking_part,
    tool_call_text_from_json,
)

NAME = "copilot-chat"
LOCATIONS = (
    "{VSCODE_USER}/workspaceStorage/*/chatSessions/*.json",
    "{VSCODE_USER}/workspaceStorage/*/chatSessions/*.jsonl",
    "{VSCODE_USER}/globalStorage/emptyWindowChatSessions/*.json",
    "{VSCODE_USER}/globalStorage/emptyWindowChatSessions/*.jsonl",
)
INITIAL, SET, PUSH, DELETE = 0, 1, 2, 3


def _is_state(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("sessionId"), str)
        and isinstance(doc.get("requests"), list)
        and ("creationDate" in doc or "version" in doc)
    )


def _is_journal(first: Any) -> bool:
    return isinstance(first, dict) and first.get("kind") == INITIAL and _is_state(first.get("v"))


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    if _is_journal(head.first_line) or _is_state(head.document):
        return True
    return NotThisFormat(
        "neither a first line {kind: 0, v: session} nor the document is a VS Code chat"
        " session {sessionId, creationDate, requests}"
    )


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    if _is_journal(Head(path).first_line):
        state = replay(path)
    else:
        state = load_json_document(path)
        if not _is_state(state):
            raise RecordError(
                path, None, None, is_not("the file", state, "a VS Code chat session object")
            )
    session_id = state["sessionId"] or Path(path).stem
    session = Session(session_id)
    for i, request in enumerate(state["requests"]):
        _request(request, f"requests[{i}]", i, path, drop_thinking, session)
    keep_session_info(
        session,
        {
            "title": state.get("customTitle"),
            "created": state.get("creationDate"),
            "responder": state.get("responderUsername"),
        },
    )
    return [session]


def replay(path: str) -> dict:
    """The session state a `.jsonl` journal ends in, read as VS Code's
    ObjectMutationLog.read does; a line that does not apply names itself."""
    state: Any = None
    for line, entry in iter_json_objects(path):
        kind = entry.get("kind")
        if kind == INITIAL:
            state = entry.get("v")
            continue
        if state is None:
            raise RecordError(path, line, "kind", "the journal has no initial state (kind 0) first")
        if kind not in (SET, PUSH, DELETE):
            raise RecordError(path, line, "kind", f"{kind!r}: expected 0, 1, 2 or 3")
        keys = require(entry, "k", list, path, line)
        if not keys:
            continue  # VS Code applies no change to the root
        try:
            parent = state
            for key in keys[:-1]:
                parent = parent[key]
            last = keys[-1]
            if kind == SET:
                parent[last] = entry.get("v")
            elif kind == DELETE:
                if isinstance(parent, dict):
                    parent.pop(last, None)
                else:
                    parent[last] = None
            else:
                array = parent.get(last) if isinstance(parent, dict) else parent[last]
                array = list(array or [])
                if isinstance(entry.get("i"), int):
                    del array[entry["i"] :]
                array.extend(entry.get("v") or [])
                parent[last] = array
        except (KeyError, IndexError, TypeError) as e:
            raise RecordError(path, line, "k", f"path {keys} does not apply: {e!r}") from None
    if not _is_state(state):
        raise RecordError(path, None, None, "the journal's state is no chat session")
    return state


def _request(
    request: Any, where: str, index: int, path: str, drop_thinking: bool, session: Session
) -> None:
    if not isinstance(request, dict):
        raise RecordError(path, None, where, "expected a request object")
    source: dict[str, Any] = {"file": path, "index": index}
    for key, name in (
        ("requestId", "request_id"),
        ("timestamp", "timestamp"),
        ("modelId", "model"),
    ):
        if isinstance(request.get(key), (str, int)):
            source[name] = request[key]
    message = require(request, "message", dict, path, None, f"{where}.")
    text = require(message, "text", str, path, None, f"{where}.message.")
    if text:
        session.records.append(record("user", text, source))
    else:
        session.skipped["empty request"] += 1
    result = request["result"] if isinstance(request.get("result"), dict) else {}
    answer = {k: v for k, v in source.items() if k != "timestamp"}
    details = result.get("errorDetails")
    if isinstance(details, dict) and isinstance(details.get("message"), str):
        answer["error"] = details["message"]
    metadata = result["metadata"] if isinstance(result.get("metadata"), dict) else {}
    rounds = metadata.get("toolCallRounds")
    if isinstance(rounds, list) and rounds:
        results = metadata.get("toolCallResults") or {}
        _rounds(rounds, results, f"{where}.result.metadata", answer, path, drop_thinking, session)
        for part in request.get("response") or []:
            kind = part.get("kind") if isinstance(part, dict) else None
            if isinstance(kind, str) and kind not in ("markdownContent", "thinking"):
                session.skipped[kind] += 1
        return
    _parts(request.get("response") or [], where, answer, path, drop_thinking, session)


def _rounds(
    rounds: list,
    results: Any,
    where: str,
    source: dict[str, Any],
    path: str,
    drop_thinking: bool,
    session: Session,
) -> None:
    if not isinstance(results, dict):
        raise RecordError(path, None, f"{where}.toolCallResults", "expected an object")
    for r, rnd in enumerate(rounds):
        rwhere = f"{where}.toolCallRounds[{r}]"
        if not isinstance(rnd, dict):
            raise RecordError(path, None, rwhere, "expected a round object")
        parts: list[str] = []
        thinking = rnd.get("thinking")
        if isinstance(thinking, dict):
            text = thinking.get("text")
            text = "".join(text) if isinstance(text, list) else text
            if isinstance(text, str) and text:
                part = thinking_part(text, drop_thinking, session)
                if part is not None:
                    parts.append(part)
        response = rnd.get("response")
        if isinstance(response, str) and response:
            parts.append(response)
        calls = rnd.get("toolCalls") or []
        ids: list[str] = []
        names: dict[str, str] = {}
        for c, call in enumerate(calls):
            cwhere = f"{rwhere}.toolCalls[{c}]."
            name = require(call, "name", str, path, None, cwhere)
            arguments = require(call, "arguments", str, path, None, cwhere)
            call_id = require(call, "id", str, path, None, cwhere)
            parts.append(tool_call_text_from_json(name, arguments))
            ids.append(call_id)
            names[call_id] = name
        src = {**source, "round": rnd.get("id", r)}
        if ids:
            src["tool_call_ids"] = ids
        if parts:
            session.records.append(record("assistant", "\n\n".join(parts), src))
        else:
            session.skipped["empty round"] += 1
        for call_id in ids:
            _tool_result(results.get(call_id), call_id, names[call_id], source, session)


def _tool_result(
    result: Any, call_id: str, tool: str, source: dict[str, Any], session: Session
) -> None:
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        session.skipped["tool result not recorded"] += 1
        return
    texts = []
    for part in result["content"]:
        value = part.get("value") if isinstance(part, dict) else None
        if isinstance(value, str):
            texts.append(value)
        else:
            session.skipped["tool result part not text"] += 1
    src = {"file": source["file"], "index": source["index"], "tool_call_id": call_id, "tool": tool}
    session.records.append(record("tool_result", "\n\n".join(texts), src))


def _parts(
    response: Any,
    where: str,
    source: dict[str, Any],
    path: str,
    drop_thinking: bool,
    session: Session,
) -> None:
    if not isinstance(response, list):
        raise RecordError(path, None, f"{where}.response", "expected a list of parts")
    segments: list[str] = []
    markdown: list[str] = []  # a stream's fragments: concatenated as the view shows them

    def flush() -> None:
        if "".join(markdown).strip():
            segments.append("".join(markdown))
        markdown.clear()

    for part in response:
        if not isinstance(part, dict):
            session.skipped["response part not an object"] += 1
            continue
        kind = part.get("kind")
        if kind is None and isinstance(part.get("value"), str):  # a MarkdownString
            markdown.append(part["value"])
        elif kind == "markdownContent" and isinstance(part.get("content"), dict):
            markdown.append(str(part["content"].get("value", "")))
        elif kind == "thinking":
            value = part.get("value")
            value = "".join(value) if isinstance(value, list) else value
            if isinstance(value, str) and value:
                thought = thinking_part(value, drop_thinking, session)
                if thought is not None:
                    flush()
                    segments.append(thought)
        else:
            session.skipped[str(kind)] += 1
    flush()
    if segments:
        session.records.append(record("assistant", "\n\n".join(segments), source))
    else:
        session.skipped["empty response"] += 1
