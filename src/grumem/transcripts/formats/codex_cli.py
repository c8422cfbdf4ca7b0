"""Codex CLI session rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`).

Read from openai/codex `codex-rs/protocol` (`RolloutLine`, `RolloutItem`,
`ResponseItem` in `models.rs`), as written by Codex CLI 0.46 to 0.6x (2025).
The older rollouts of Codex CLI before 0.4x (a bare meta object, then bare
response items and `record_type: state` lines) are not this format.

Each line is `{timestamp, type, payload}`; `type` is one of
- `session_meta`: the session `id`, cwd, CLI version, git state. The first
  one names the session (the file name otherwise); it holds no text.
- `response_item`: what the model saw and said, `payload.type` one of
  `message` (role user, assistant, developer or system; content parts
  `input_text`, `output_text`, `input_image`), `reasoning` (`summary` parts,
  optional plain `content`, `encrypted_content`), `function_call` (name,
  arguments as a JSON string, call_id), `function_call_output` (call_id,
  output), `custom_tool_call` / `custom_tool_call_output` (freeform input,
  such as an apply_patch body), `local_shell_call`, `web_search_call`,
  `ghost_snapshot` and `compaction`.
- `compacted`: the summary (`message`) that replaced the history when the
  context was compacted; its `replacement_history` repeats earlier items.
- `turn_context`: model, cwd and policies of the next turn.
- `event_msg`: UI events; `user_message`, `agent_message` and
  `agent_reasoning` repeat the text of response items.

Decisions:
- user message -> user record; assistant -> assistant; developer and system
  -> system. A user message whose every part is harness context Codex injects
  (`<environment_context>`, `<user_instructions>`, `# AGENTS.md
  instructions`) is a system record: the user did not type it.
- reasoning -> assistant record of `Thinking: ` summaries and content (kept
  unless drop_thinking). Encrypted reasoning is never rendered (not even as a
  placeholder: it is opaque to every reader), only counted.
- function_call, custom_tool_call, local_shell_call, web_search_call ->
  assistant record `Tool call <name>: <input>`; outputs -> tool_result records
  whose source names the call_id and the tool.
- compacted -> system record of `message` (the model continues from it);
  replacement_history is not rendered (it repeats what came before).
- Dropped and counted by kind: session_meta, turn_context, every event_msg
  (duplicates of response items, or UI and token-count notices),
  ghost_snapshot (git bookkeeping), compaction (encrypted), and response item
  types this reader does not know (so a newer Codex does not stop the run;
  the counts show what was left out).
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
    data_url_placeholder,
    is_not,
    iter_json_objects,
    record,
    require,
    session_stem,
    thinking_text,
    tool_call_text,
    tool_call_text_from_json,
)

NAME = "codex-cli"
# Where `grumem discover` looks (grumem.core.locations): sessions by date, and those
# archived from the session list; CODEX_HOME moves ~/.codex
LOCATIONS = (
    "~/.codex/sessions/*/*/*/rollout-*.jsonl",
    "~/.codex/archived_sessions/rollout-*.jsonl",
    "${CODEX_HOME}/sessions/*/*/*/rollout-*.jsonl",
    "${CODEX_HOME}/archived_sessions/rollout-*.jsonl",
)
SUFFIXES = (".jsonl",)
LINE_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg"})
ROLE_MAP = {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}
HARNESS_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
BOOKKEEPING_ITEMS = frozenset({"ghost_snapshot", "compaction", "compaction_summary"})


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    obj = head.first_line
    if not isinstance(obj, dict):
        return NotThisFormat(is_not("the first line", obj, "a JSON object"))
    if obj.get("type") != "session_meta" or not isinstance(obj.get("payload"), dict):
        return NotThisFormat("the first line is not a session_meta with a payload")
    return True


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    session = Session(session_stem(path, SUFFIXES))
    named = False
    tool_names: dict[str, str] = {}
    for line, obj in iter_json_objects(path):
        kind = require(obj, "type", str, path, line)
        payload = require(obj, "payload", dict, path, line)
        if kind not in LINE_TYPES:
            session.skipped[kind] += 1
            continue
        if kind == "session_meta":
            if not named:
                session.id = require(payload, "id", str, path, line, "payload.")
                named = True
            session.skipped[kind] += 1
        elif kind == "response_item":
            _response_item(payload, path, line, drop_thinking, session, tool_names)
        elif kind == "compacted":
            message = require(payload, "message", str, path, line, "payload.")
            if message:
                session.records.append(
                    record("system", message, {"file": path, "line": line, "type": kind})
                )
            else:
                session.skipped["empty compacted"] += 1
        else:
            sub = payload.get("type")
            session.skipped[f"{kind}:{sub}" if isinstance(sub, str) else kind] += 1
    return [session]


def _response_item(
    item: dict,
    path: str,
    line: int,
    drop_thinking: bool,
    session: Session,
    tool_names: dict[str, str],
) -> None:
    kind = require(item, "type", str, path, line, "payload.")
    src: dict[str, Any] = {"file": path, "line": line}
    if kind == "message":
        _message(item, path, line, session, src)
    elif kind == "reasoning":
        _reasoning(item, path, line, drop_thinking, session, src)
    elif kind == "function_call":
        name = require(item, "name", str, path, line, "payload.")
        arguments = require(item, "arguments", str, path, line, "payload.")
        call_id = _call_id(item, path, line, name, tool_names)
        text = tool_call_text_from_json(name, arguments)
        session.records.append(record("assistant", text, {**src, "call_id": call_id}))
    elif kind == "custom_tool_call":
        name = require(item, "name", str, path, line, "payload.")
        tool_input = require(item, "input", str, path, line, "payload.")
        call_id = _call_id(item, path, line, name, tool_names)
        # freeform input (a patch, a script) is shown as written, never re-encoded
        text = f"Tool call {name}: {tool_input}"
        session.records.append(record("assistant", text, {**src, "call_id": call_id}))
    elif kind == "local_shell_call":
        action = require(item, "action", dict, path, line, "payload.")
        shell_id = item.get("call_id")
        if isinstance(shell_id, str):
            tool_names[shell_id] = "local_shell"
            src["call_id"] = shell_id
        session.records.append(record("assistant", tool_call_text("local_shell", action), src))
    elif kind == "web_search_call":
        action = require(item, "action", dict, path, line, "payload.")
        session.records.append(record("assistant", tool_call_text("web_search", action), src))
    elif kind in ("function_call_output", "custom_tool_call_output"):
        call_id = require(item, "call_id", str, path, line, "payload.")
        text = _output_text(item, path, line)
        src["call_id"] = call_id
        if call_id in tool_names:
            src["tool"] = tool_names[call_id]
        session.records.append(record("tool_result", text, src))
    elif kind in BOOKKEEPING_ITEMS:
        session.skipped[kind] += 1
    else:
        session.skipped[f"response_item:{kind}"] += 1


def _call_id(item: dict, path: str, line: int, name: str, tool_names: dict[str, str]) -> str:
    call_id = require(item, "call_id", str, path, line, "payload.")
    tool_names[call_id] = name
    return call_id


def _message(item: dict, path: str, line: int, session: Session, src: dict[str, Any]) -> None:
    role_name = require(item, "role", str, path, line, "payload.")
    if role_name not in ROLE_MAP:
        raise RecordError(
            path,
            line,
            "payload.role",
            f"unknown role {role_name!r}; expected one of {', '.join(ROLE_MAP)}",
        )
    content = require(item, "content", list, path, line, "payload.")
    pieces: list[str] = []
    for j, part in enumerate(content):
        where = f"payload.content[{j}]."
        ptype = require(part, "type", str, path, line, where)
        if ptype in ("input_text", "output_text", "text"):
            pieces.append(require(part, "text", str, path, line, where))
        elif ptype == "input_image":
            url = require(part, "image_url", str, path, line, where)
            pieces.append(data_url_placeholder("image", url))
        elif ptype == "refusal":
            pieces.append(f"Refusal: {require(part, 'refusal', str, path, line, where)}")
        else:
            raise RecordError(path, line, f"{where}type", f"unknown content part {ptype!r}")
    texts = [p for p in pieces if p]
    if not texts:
        session.skipped[f"empty {role_name} message"] += 1
        return
    role = ROLE_MAP[role_name]
    if role == "user" and all(p.lstrip().startswith(HARNESS_PREFIXES) for p in texts):
        role = "system"
    session.records.append(record(role, "\n\n".join(texts), src))


def _reasoning(
    item: dict, path: str, line: int, drop_thinking: bool, session: Session, src: dict[str, Any]
) -> None:
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise RecordError(path, line, f"payload.{key}", "expected a list")
        for j, part in enumerate(parts):
            text = require(part, "text", str, path, line, f"payload.{key}[{j}].")
            if text:
                texts.append(text)
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise RecordError(path, line, "payload.encrypted_content", "expected a string or null")
    if encrypted:
        session.skipped["encrypted reasoning"] += 1
    if not texts:
        if not encrypted:
            session.skipped["empty reasoning"] += 1
        return
    if drop_thinking:
        session.skipped["thinking"] += 1
        return
    text = "\n\n".join(thinking_text(t) for t in texts)
    session.records.append(record("assistant", text, src))


def _output_text(item: dict, path: str, line: int) -> str:
    """A tool output: a string, content items (an MCP result), or the older
    `{content, success}` object."""
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    if isinstance(output, list):
        pieces = []
        for j, part in enumerate(output):
            where = f"payload.output[{j}]."
            ptype = require(part, "type", str, path, line, where)
            if ptype in ("input_text", "output_text", "text"):
                pieces.append(require(part, "text", str, path, line, where))
            elif ptype == "input_image":
                url = require(part, "image_url", str, path, line, where)
                pieces.append(data_url_placeholder("image", url))
            else:
                raise RecordError(path, line, f"{where}type", f"unknown output part {ptype!r}")
        return "\n\n".join(pieces)
    if "output" not in item:
        raise RecordError(path, line, "payload.output", "missing")
    raise RecordError(
        path, line, "payload.output", "expected a string, a list of parts or {content, success}"
    )
