"""Anthropic Messages histories: what Cline and Roo Code save as `api_conversation_history.json`.

Read from the Anthropic Messages API's `MessageParam` (the
`@anthropic-ai/sdk` types of 2025: content blocks `text`, `image`,
`document`, `tool_use`, `tool_result`, `thinking`, `redacted_thinking`) as
Cline 3.x (`src/core/storage/disk.ts`, `saveApiConversationHistory`) and
Roo Code 3.x (`ApiMessage = MessageParam & {ts?, isSummary?}`) write it:
one JSON array of `{role, content}` per task, in
`<globalStorage>/saoudrizwan.claude-dev/tasks/<task id>/` (Cline),
`<globalStorage>/rooveterinaryinc.roo-cline/tasks/<task id>/` (Roo Code) or
`<globalStorage>/kilocode.kilo-code/tasks/<task id>/` (Kilo Code's extension, a
fork of Roo Code), `<globalStorage>` being any VS Code family editor's; Cline's
CLI keeps the same tasks in `~/.cline/data/tasks/<task id>/` (`$CLINE_DIR/data`).
Extra keys on a message (`ts`, `isSummary`) are bookkeeping and ignored.

Decisions:
- The session is the task: the file's folder name when the file has
  Cline's name (every task's file is called `api_conversation_history.json`),
  the file name without `.json` otherwise.
- `content` is a string (one record) or a list of blocks. An assistant
  message is one assistant record: its blocks in order, joined by a blank
  line; `tool_use` shows as `Tool call <name>: <input>`; `thinking` as
  `Thinking: <text>` unless drop_thinking (then counted `thinking`);
  `redacted_thinking` is encrypted and never rendered (counted).
- A user message: each `tool_result` block is its own tool_result record
  (its source names the `tool_use_id`, the tool and `is_error`); the text
  around them (Cline puts the user's feedback and `<environment_details>`
  there) forms user records, consecutive blocks joined by a blank line.
  A tool result's content is a string or text/image blocks.
- `image` and `document` blocks become one-line placeholders (a base64
  blob is never rendered; a URL is kept); a plain-text document is its text.
- Detection: an array (or `{messages: [...]}`) of user/assistant messages
  whose blocks are all Anthropic's, holding at least one block only
  Anthropic has (`tool_use`, `tool_result`, `thinking`, `redacted_thinking`,
  an `image` with a `source`). Plain-text histories fit OpenAI's shape as
  well and are read by the `openai` format, with the same records.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    blob_placeholder,
    is_not,
    load_json_document,
    record,
    require,
    session_stem,
    thinking_part,
    tool_call_text,
)

NAME = "anthropic"
# Where `grumem discover` looks (grumem.core.locations): the tasks of Cline, Roo Code
# and Kilo Code in the globalStorage of every VS Code family editor, and Cline CLI's
LOCATIONS = (
    "{VSCODE_USER}/globalStorage/saoudrizwan.claude-dev/tasks/*/api_conversation_history.json",
    "{VSCODE_USER}/globalStorage/rooveterinaryinc.roo-cline/tasks/*/api_conversation_history.json",
    "{VSCODE_USER}/globalStorage/kilocode.kilo-code/tasks/*/api_conversation_history.json",
    "~/.cline/data/tasks/*/api_conversation_history.json",
    "${CLINE_DIR}/data/tasks/*/api_conversation_history.json",
)
FILE_NAME = "api_conversation_history.json"
ROLES = ("user", "assistant")
BLOCKS = frozenset(
    {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}
)
# the blocks whose text a record shows (a thinking block's rendered)
TEXT_BLOCKS = ("text", "thinking")
ONLY_ANTHROPIC = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
# media-like blocks, each one line: Anthropic's image and document, Cline 4's file and media
MEDIA_BLOCKS = frozenset({"image", "document", "file", "media"})


def _messages_of(doc: Any) -> tuple[list | None, str]:
    if isinstance(doc, list):
        return doc, ""
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return doc["messages"], "messages"
    return None, ""


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    messages, _ = _messages_of(head.document)
    if not messages:
        return NotThisFormat(is_not("the file", head.document, "a list of messages"))
    if isinstance(head.document, dict) and "sessionId" in head.document:
        return NotThisFormat("the object names a sessionId: a session file of its own tool")
    anthropic_only = False
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            return NotThisFormat(f"message [{i}] is not a user or assistant message")
        content = m.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            return NotThisFormat(f"message [{i}] has no content string or list of blocks")
        for b in content:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind not in BLOCKS:
                return NotThisFormat(f"message [{i}] has a block {kind!r} Anthropic does not")
            if kind == "tool_result" and "tool_use_id" not in b:
                return NotThisFormat(f"message [{i}] has a tool_result without tool_use_id")
            anthropic_only |= kind in ONLY_ANTHROPIC or (kind == "image" and "source" in b)
    if not anthropic_only:
        return NotThisFormat("no tool_use, tool_result, thinking or image block (plain chat)")
    return True


def session_id(path: str | os.PathLike[str]) -> str:
    p = Path(path).resolve()
    if p.name == FILE_NAME and p.parent.name:
        return p.parent.name
    return session_stem(p, (".json",))


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    messages, prefix = _messages_of(load_json_document(path))
    if messages is None:
        raise RecordError(path, None, None, "expected a JSON array of {role, content} messages")
    session = Session(session_id(path))
    convert_messages(
        messages, prefix, path, lambda i, _: {"file": path, "index": i}, drop_thinking, session
    )
    return [session]


def convert_messages(
    messages: list,
    prefix: str,
    path: str,
    source_of: Callable[[int, dict], dict[str, Any]],
    drop_thinking: bool,
    session: Session,
    blocks: frozenset[str] = BLOCKS,
) -> None:
    """Append the records of Anthropic-shaped messages to `session`; `source_of(i,
    message)` is each message's source, `blocks` the content block types allowed
    (the Cline 4 reader adds its `file` and `media` blocks)."""
    tool_names: dict[str, str] = {}
    kinds = _Blocks(path, blocks)
    for i, msg in enumerate(messages):
        where = f"{prefix}[{i}]"
        if not isinstance(msg, dict):
            raise RecordError(path, None, where, "expected a message object")
        role = require(msg, "role", str, path, None, f"{where}.")
        if role not in ROLES:
            raise RecordError(
                path, None, f"{where}.role", f"unknown role {role!r}; expected user or assistant"
            )
        content = require(msg, "content", (str, list), path, None, f"{where}.")
        src = source_of(i, msg)
        before = (len(session.records), sum(session.skipped.values()))
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if role == "assistant":
            _assistant(items, f"{where}.content", kinds, src, drop_thinking, session, tool_names)
        else:
            _user(items, f"{where}.content", kinds, src, session, tool_names)
        if (len(session.records), sum(session.skipped.values())) == before:
            session.skipped[f"empty {role} message"] += 1


@dataclass(frozen=True)
class _Blocks:
    """The file being read and the block types its messages may hold."""

    path: str
    allowed: frozenset[str]


def _block_type(block: Any, where: str, kinds: _Blocks) -> str:
    kind = require(block, "type", str, kinds.path, None, f"{where}.")
    if kind not in kinds.allowed:
        raise RecordError(kinds.path, None, f"{where}.type", f"unknown content block {kind!r}")
    return kind


def _assistant(
    blocks: list,
    where: str,
    kinds: _Blocks,
    src: dict[str, Any],
    drop_thinking: bool,
    session: Session,
    tool_names: dict[str, str],
) -> None:
    path = kinds.path
    parts: list[str] = []
    ids: list[str] = []
    for j, block in enumerate(blocks):
        bwhere = f"{where}[{j}]"
        kind = _block_type(block, bwhere, kinds)
        if kind in TEXT_BLOCKS:
            part = text_part(block, path, None, f"{bwhere}.", drop_thinking, session)
            if part is not None:
                parts.append(part)
        elif kind == "redacted_thinking":
            session.skipped["redacted_thinking"] += 1
        elif kind == "tool_use":
            name = require(block, "name", str, path, None, f"{bwhere}.")
            call_id = require(block, "id", str, path, None, f"{bwhere}.")
            tool_names[call_id] = name
            ids.append(call_id)
            parts.append(tool_call_text(name, block.get("input", {})))
        elif kind in MEDIA_BLOCKS:
            parts.append(media_placeholder(block, path, None, f"{bwhere}."))
        else:
            raise RecordError(
                path, None, f"{bwhere}.type", f"a {kind} block in an assistant message"
            )
    if parts:
        session.records.append(
            record("assistant", "\n\n".join(parts), {**src, "tool_use_ids": ids} if ids else src)
        )


def _user(
    blocks: list,
    where: str,
    kinds: _Blocks,
    src: dict[str, Any],
    session: Session,
    tool_names: dict[str, str],
) -> None:
    def typed() -> Iterator[tuple[None, str, dict]]:
        for j, block in enumerate(blocks):
            _block_type(block, f"{where}[{j}]", kinds)
            yield None, f"{where}[{j}].", block

    user_records(typed(), kinds.path, src, tool_names, session, "a {kind} block in a user message")


def user_records(
    blocks: Iterable[tuple[int | None, str, dict]],
    path: str,
    source: dict[str, Any],
    tool_names: Mapping[str, str],
    session: Session,
    unexpected: str,
    media: Collection[str] = MEDIA_BLOCKS,
) -> None:
    """Append the records of a user message's `blocks`, each (its line, or None; where it
    is, ending with a dot; the block): each `tool_result` a tool_result record, the text
    and `media` blocks between them user records, consecutive ones joined by a blank
    line. `source` is the message's; a block's own line replaces its `line` in a tool
    result's. Any other block is an error, its reason `unexpected` with the block's kind.
    Shared with the Claude Code reader, whose lines hold these same blocks."""
    pending: list[str] = []

    def flush() -> None:
        if pending:
            # a copy each: a reader may add to one record's source (keep_session_info)
            session.records.append(record("user", "\n\n".join(pending), {**source}))
            pending.clear()

    for line, where, block in blocks:
        kind = block["type"]
        if kind == "text":
            if (text := text_part(block, path, line, where)) is not None:
                pending.append(text)
        elif kind in media:
            pending.append(media_placeholder(block, path, line, where))
        elif kind == "tool_result":
            flush()
            own = source if line is None else {**source, "line": line}
            session.records.append(tool_result_record(block, path, line, where, own, tool_names))
        else:
            raise RecordError(path, line, f"{where}type", unexpected.format(kind=kind))
    flush()


def text_part(
    block: dict,
    path: str,
    line: int | None,
    where: str,
    drop_thinking: bool = False,
    session: Session | None = None,
) -> str | None:
    """The text of a `text` block, or the rendered text of a `thinking` one (with the
    `session` whose skipped counts it updates); None for an empty text, or a thinking
    block dropped or empty. `where` ends with a dot."""
    kind = block["type"]
    text = require(block, kind, str, path, line, where)
    if kind == "thinking":
        assert session is not None, "a thinking block needs the session that counts it"
        return thinking_part(text, drop_thinking, session)
    return text or None


def tool_result_record(
    block: dict,
    path: str,
    line: int | None,
    where: str,
    source: dict[str, Any],
    tool_names: Mapping[str, str],
) -> dict:
    """A tool_result block as its record: `source` with the block's tool_use_id, the tool's
    name when its call was seen, and is_error when true. `where` ends with a dot."""
    call_id = require(block, "tool_use_id", str, path, line, where)
    text = tool_result_text(block, path, line, where)
    own: dict[str, Any] = {**source, "tool_use_id": call_id}
    if call_id in tool_names:
        own["tool"] = tool_names[call_id]
    if block.get("is_error") is True:
        own["is_error"] = True
    return record("tool_result", text, own)


def tool_result_text(block: dict, path: str, line: int | None, where: str) -> str:
    """A tool_result block's content: a string, or text and media blocks joined by a
    blank line; none is an empty output, still the answer. `where` ends with a dot.
    Shared with the Claude Code reader, whose lines hold these same blocks."""
    content = block.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RecordError(path, line, f"{where}content", "expected a string or a list of blocks")
    pieces = []
    for k, part in enumerate(content):
        pwhere = f"{where}content[{k}]."
        kind = require(part, "type", str, path, line, pwhere)
        if kind == "text":
            pieces.append(require(part, "text", str, path, line, pwhere))
        elif kind in MEDIA_BLOCKS:
            pieces.append(media_placeholder(part, path, line, pwhere))
        else:
            raise RecordError(path, line, f"{pwhere}type", f"unknown content block {kind!r}")
    return "\n\n".join(pieces)


def media_placeholder(block: dict, path: str, line: int | None, where: str) -> str:
    """An image or document block as one line (a base64 blob is never rendered; a URL is
    kept); a plain-text document is its text. `where` ends with a dot."""
    kind = block["type"]
    if kind == "file":  # Cline 4: a file the user attached, with its text
        name = require(block, "path", str, path, line, where)
        return f"[file: {name}]\n{require(block, 'content', str, path, line, where)}"
    if kind == "media":  # Cline 4: media a tool generated
        media = require(block, "media", dict, path, line, where)
        return f"[media: {media.get('mimeType', media.get('type', 'unknown'))}]"
    if kind == "image" and "source" not in block and "data" in block:  # Cline 4: inline
        data = require(block, "data", str, path, line, where)
        return blob_placeholder(kind, str(block.get("mediaType", "unknown")), data)
    src = require(block, "source", dict, path, line, where)
    if src.get("type") == "base64":
        data = require(src, "data", str, path, line, f"{where}source.")
        return blob_placeholder(kind, str(src.get("media_type", "unknown")), data)
    if "url" in src:
        return f"[{kind}: {src['url']}]"
    if src.get("type") == "text" and isinstance(src.get("data"), str):
        return src["data"]
    why = f"unknown {kind} source {src.get('type')!r}"
    raise RecordError(path, line, f"{where}source.type", why)
