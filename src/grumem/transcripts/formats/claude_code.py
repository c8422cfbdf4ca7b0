"""Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`).

Each line is one JSON object with a `type`. `user` and `assistant` lines carry a
`message` (the API message) plus `uuid`, `parentUuid`, `sessionId`,
`isSidechain`. Everything else is bookkeeping the model never saw and is
skipped, counted by kind: `summary`, `file-history-snapshot`,
`queue-operation`, and `system` lines (hook notices, compaction markers,
local-command echoes; counted as `system:<subtype>`). Other types are skipped
and counted the same way, so a newer Claude Code does not stop the run but
the printed counts show what was left out.

Decisions:
- One assistant API message is written as several lines sharing
  `message.id`, one content block per line; they are merged, in line order,
  into one assistant record (blocks joined by a blank line) placed where the
  message starts.
- Tool results arrive as user lines of `tool_result` blocks; each becomes a
  `tool_result` record (its source names the `tool_use_id` and the tool).
  Text blocks on a user line form a user record; a line carrying only tool
  results yields no user record.
- `isMeta` user lines (command caveats, local command output) were sent to
  the model and are kept.
- Sidechains (subagents, `isSidechain: true`) are interleaved with the main
  chain. A sidechain line whose `parentUuid` is a sidechain line already seen
  belongs to that line's chain; otherwise it starts a new one. The main chain
  is the session `<sessionId>`; each sidechain is `<sessionId>-side-<root
  uuid prefix>`. Branches inside the main chain (edited prompts) are kept in
  file order, not resolved.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    blob_placeholder,
    is_not,
    iter_json_objects,
    record,
    require,
    tool_call_text,
)
from grumem.transcripts.formats.anthropic import (
    TEXT_BLOCKS,
    media_placeholder,
    text_part,
    user_records,
)

NAME = "claude-code"
# Where `grumem discover` looks (grumem.core.locations): one file per session under
# a directory per project; CLAUDE_CONFIG_DIR moves ~/.claude
LOCATIONS = ("~/.claude/projects/*/*.jsonl", "${CLAUDE_CONFIG_DIR}/projects/*/*.jsonl")
MESSAGE_TYPES = ("user", "assistant")
KNOWN_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation"}
)
CC_MEDIA = ("image", "document")  # the media blocks Claude Code writes
MAIN = ""  # chain key of the main chain; a sidechain's key is its root uuid


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    obj = head.first_line
    if not isinstance(obj, dict):
        return NotThisFormat(is_not("the first line", obj, "a JSON object"))
    if obj.get("type") not in KNOWN_TYPES:
        return NotThisFormat(f"the first line's type {obj.get('type')!r} is no Claude Code type")
    if not any(k in obj for k in ("sessionId", "leafUuid", "snapshot")):
        return NotThisFormat("the first line has no sessionId, leafUuid or snapshot")
    return True


@dataclass
class _Message:
    """One future group of records: a user line, or all lines of one assistant message."""

    role: str
    line: int
    message_id: str | None
    blocks: list[tuple[int, int, Any]] = field(default_factory=list)  # (line, index, block)


@dataclass
class _Chain:
    root: str
    session_id: str | None = None
    messages: list[_Message] = field(default_factory=list)
    open_messages: dict[str, _Message] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    chains: dict[str, _Chain] = {}
    chain_of: dict[str, str] = {}
    file_skipped: Counter[str] = Counter()

    for line, obj in iter_json_objects(path):
        kind = obj.get("type")
        if not isinstance(kind, str):
            raise RecordError(path, line, "type", "missing or not a string")
        key = _chain_key(obj, chain_of, path, line)
        chain = None
        if key is not None:
            chain = chains.setdefault(key, _Chain(key))
        if kind not in MESSAGE_TYPES:
            skip_kind = f"system:{obj.get('subtype', 'notice')}" if kind == "system" else kind
            (chain.skipped if chain is not None else file_skipped)[skip_kind] += 1
            continue
        if chain is None:
            raise RecordError(path, line, "uuid", f"missing on a {kind} line")
        _add_message(chain, obj, kind, path, line)

    sessions: list[Session] = []
    for chain in chains.values():
        if chain.session_id is None:  # only bookkeeping lines: nothing the model saw
            file_skipped.update(chain.skipped)
            continue
        sessions.append(_to_session(chain, path, drop_thinking))
    if sessions:
        sessions[0].skipped.update(file_skipped)
    return sessions


def _chain_key(obj: dict, chain_of: dict[str, str], path: str, line: int) -> str | None:
    uuid = obj.get("uuid")
    if uuid is None:
        return None
    if not isinstance(uuid, str):
        raise RecordError(path, line, "uuid", "expected a string")
    side = obj.get("isSidechain", False)
    if not isinstance(side, bool):
        raise RecordError(path, line, "isSidechain", "expected true or false")
    key = MAIN
    if side:
        parent = obj.get("parentUuid")
        key = chain_of.get(parent, MAIN) if isinstance(parent, str) else MAIN
        if key == MAIN:  # no sidechain parent seen: the root of a new sidechain
            key = uuid
    chain_of[uuid] = key
    return key


def _add_message(chain: _Chain, obj: dict, kind: str, path: str, line: int) -> None:
    session_id = require(obj, "sessionId", str, path, line)
    message = require(obj, "message", dict, path, line)
    content = require(message, "content", (str, list), path, line, "message.")
    if chain.session_id is None:
        side = f"-side-{chain.root[:8]}" if chain.root != MAIN else ""
        chain.session_id = session_id + side
    blocks = (
        [(line, 0, {"type": "text", "text": content})]
        if isinstance(content, str)
        else [(line, i, b) for i, b in enumerate(content)]
    )
    for _, i, block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise RecordError(path, line, f"message.content[{i}].type", "missing or not a string")
        if block["type"] == "tool_use":
            tool_id = require(block, "id", str, path, line, f"message.content[{i}].")
            chain.tool_names[tool_id] = require(
                block, "name", str, path, line, f"message.content[{i}]."
            )

    message_id = message.get("id") if kind == "assistant" else None
    if message_id is not None and not isinstance(message_id, str):
        raise RecordError(path, line, "message.id", "expected a string")
    if message_id is not None and message_id in chain.open_messages:
        chain.open_messages[message_id].blocks.extend(blocks)
        return
    msg = _Message(kind, line, message_id, blocks)
    chain.messages.append(msg)
    if message_id is not None:
        chain.open_messages[message_id] = msg


def _to_session(chain: _Chain, path: str, drop_thinking: bool) -> Session:
    assert chain.session_id is not None
    session = Session(chain.session_id, skipped=Counter(chain.skipped))
    for msg in chain.messages:
        before = (len(session.records), sum(session.skipped.values()))
        if msg.role == "assistant":
            _assistant_records(msg, chain, path, drop_thinking, session)
        else:
            _user_records(msg, chain, path, session)
        if (len(session.records), sum(session.skipped.values())) == before:
            session.skipped[f"empty {msg.role} message"] += 1
    return session


def _assistant_records(
    msg: _Message, chain: _Chain, path: str, drop_thinking: bool, session: Session
) -> None:
    parts: list[str] = []
    tool_use_ids: list[str] = []
    for line, i, block in msg.blocks:
        where = f"message.content[{i}]."
        kind = block["type"]
        if kind in TEXT_BLOCKS:
            if (part := text_part(block, path, line, where, drop_thinking, session)) is not None:
                parts.append(part)
        elif kind == "redacted_thinking":
            data = require(block, "data", str, path, line, where)
            if drop_thinking:
                session.skipped["redacted_thinking"] += 1
            else:
                parts.append(blob_placeholder("redacted thinking", "encrypted", data))
        elif kind in ("tool_use", "server_tool_use"):
            name = require(block, "name", str, path, line, where)
            parts.append(tool_call_text(name, block.get("input", {})))
            if isinstance(block.get("id"), str):
                tool_use_ids.append(block["id"])
        elif kind in CC_MEDIA:
            parts.append(media_placeholder(block, path, line, where))
        else:
            raise RecordError(path, line, f"{where}type", f"unknown content block {kind!r}")
    if parts:
        source: dict[str, Any] = {"file": path, "line": msg.line}
        if msg.message_id is not None:
            source["message_id"] = msg.message_id
        if tool_use_ids:
            source["tool_use_ids"] = tool_use_ids
        session.records.append(record("assistant", "\n\n".join(parts), source))


def _user_records(msg: _Message, chain: _Chain, path: str, session: Session) -> None:
    blocks = ((line, f"message.content[{i}].", block) for line, i, block in msg.blocks)
    source = {"file": path, "line": msg.line}
    unexpected = "unknown content block {kind!r}"
    user_records(blocks, path, source, chain.tool_names, session, unexpected, CC_MEDIA)
