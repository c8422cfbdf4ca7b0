"""Cline 4 sessions (`~/.cline/data/sessions/<session id>/<session id>.messages.json`).

Read from cline/cline's SDK: `sdk/packages/core/docs/messages-contract-v1.md`,
`buildMessagesFilePayload` (`sdk/packages/core/src/services/session-data.ts`),
`SessionArtifacts` (`.../services/session-artifacts.ts`) and the message types
of `sdk/packages/shared/src/llms/messages.ts`, at 4887da4 (2026-04-22, the
contract's first version) and 21cb8d2 (2026-08-22, Cline 4.1.13, which adds
`origin`). `CLINE_DIR` (then `.../data`), `CLINE_DATA_DIR` and
`CLINE_SESSION_DATA_DIR` move the folder.

One object per file: `{version: 1, updated_at, agent, sessionId, taskType?,
origin?, messages, system_prompt?}`. `messages` are Anthropic Messages
(`{id, role, content, ts?, modelInfo?, metrics?}`, content blocks `text`,
`thinking`, `redacted_thinking`, `tool_use`, `tool_result`), read by the
`anthropic` format's converter, which knows Cline 4's own blocks too: an
inline `image` (`data`, `mediaType`) and a generated `media` are one-line
placeholders, an attached `file` is `[file: <path>]` and its text.

This is not the `anthropic` format: that one reads the task layout of Cline
3 and Roo Code (`<globalStorage>/saoudrizwan.claude-dev/tasks/<id>/
api_conversation_history.json`, a bare array), which Cline 4's VS Code
extension still reads for old tasks; here the session is a file of its own
shape, named by its `sessionId`.

- `system_prompt` -> the first record, system.
- Each message's source names its `id`, `ts` and the model (`modelInfo.id`).
- A subagent or teammate writes its own file in its lead's folder
  (`<root>/<agent>.messages.json`, sessionId `<root>__<agent>`): a session of
  its own, as every file is; its `agent` and `taskType` go into its first
  record's source (`session`), with `updated_at`.
"""

from __future__ import annotations

import os
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    is_not,
    keep_session_info,
    load_json_document,
    record,
    require,
)
from grumem.transcripts.formats.anthropic import BLOCKS, convert_messages

NAME = "cline"
CLINE_BLOCKS = BLOCKS | {"file", "media"}
LOCATIONS = (
    "${CLINE_SESSION_DATA_DIR}/*/*.messages.json",
    "${CLINE_DATA_DIR}/sessions/*/*.messages.json",
    "${CLINE_DIR}/data/sessions/*/*.messages.json",
    "~/.cline/data/sessions/*/*.messages.json",
)


def _is_messages_file(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("version"), int)
        and isinstance(doc.get("sessionId"), str)
        and isinstance(doc.get("messages"), list)
        and "updated_at" in doc
    )


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    if _is_messages_file(head.document):
        return True
    return NotThisFormat(
        is_not("the file", head.document, "a Cline messages file {version, sessionId, messages}")
    )


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    doc = load_json_document(path)
    if not _is_messages_file(doc):
        raise RecordError(
            path, None, None, "expected a Cline messages file {version, updated_at, sessionId, ...}"
        )
    if doc["version"] != 1:
        raise RecordError(
            path, None, "version", f"{doc['version']}: grumem reads version 1 of this file"
        )
    session_id = require(doc, "sessionId", str, path, None)
    if not session_id:
        raise RecordError(path, None, "sessionId", "empty")
    session = Session(session_id)
    prompt = doc.get("system_prompt")
    if isinstance(prompt, str) and prompt:
        session.records.append(record("system", prompt, {"file": path, "field": "system_prompt"}))
    convert_messages(
        doc["messages"],
        "messages",
        path,
        lambda i, msg: _source(path, i, msg),
        drop_thinking,
        session,
        CLINE_BLOCKS,
    )
    keep_session_info(
        session,
        {
            "agent": doc.get("agent"),
            "task_type": doc.get("taskType"),
            "updated": doc.get("updated_at"),
        },
    )
    return [session]


def _source(path: str, index: int, msg: dict) -> dict[str, Any]:
    source: dict[str, Any] = {"file": path, "index": index}
    for key, name in (("id", "id"), ("ts", "timestamp")):
        if isinstance(msg.get(key), (str, int)):
            source[name] = msg[key]
    info = msg.get("modelInfo")
    if isinstance(info, dict) and isinstance(info.get("id"), str):
        source["model"] = info["id"]
    return source
