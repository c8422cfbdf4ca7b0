"""SWE-agent trajectories (`<instance>.traj`): `{trajectory, history, info, ...}`.

`history` is what the model was sent: chat messages with SWE-agent's extra
fields (`agent`, `message_type`, `is_demo`, `thought`, `action`). Newer files
use function calling: the assistant's `tool_calls` and role `tool` replies
carrying `tool_call_ids`. Thought/action files send observations back as
role `user` (`message_type: observation`, or no message_type in 0.x files);
after the first assistant turn those are tool_result records. Demonstrations (`is_demo`, or
`message_type: demonstration`) are worked examples of another task placed in
the prompt: they are skipped and counted, since evidence found in them would
not be about this session.

A file without `history` falls back to `trajectory` steps: each step's model
`response` (or thought and action) is an assistant record and its
`observation` a tool_result.
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
    load_json_object,
    record,
    require,
    session_stem,
)
from grumem.transcripts.formats.openai_chat import ROLE_MAP, convert_messages

NAME = "swe-agent"
SUFFIXES = (".traj", ".json")


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    doc = head.document
    if not isinstance(doc, dict):
        return NotThisFormat(is_not("the file", doc, "a JSON object"))
    if "messages" in doc:
        return NotThisFormat("the object has messages, which a SWE-agent trajectory does not")
    history, steps = doc.get("history"), doc.get("trajectory")
    if (isinstance(history, list) and bool(history)) or (
        isinstance(steps, list)
        and bool(steps)
        and all(isinstance(s, dict) and "observation" in s for s in steps)
    ):
        return True
    return NotThisFormat("no non-empty history, nor a trajectory of steps with observation")


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    doc = load_json_object(path, "'history' or 'trajectory'")
    session = Session(session_stem(path, SUFFIXES))
    history = doc.get("history")
    if isinstance(history, list) and history:
        _read_history(history, path, drop_thinking, session)
    elif "trajectory" in doc:
        _read_steps(require(doc, "trajectory", list, path, None), path, session)
    else:
        raise RecordError(path, None, "history", "missing (and no 'trajectory' to fall back on)")
    return [session]


def _read_history(history: list, path: str, drop_thinking: bool, session: Session) -> None:
    acted = False

    def roles(i: int, msg: dict[str, Any]) -> dict[str, str] | None:
        """Demonstrations left out (counted); an observation after the first assistant
        turn is a tool_result."""
        nonlocal acted
        if msg.get("is_demo") is True or msg.get("message_type") == "demonstration":
            session.skipped["demonstration"] += 1
            return None
        observation = msg.get("role") == "user" and acted
        observation &= msg.get("message_type") in (None, "observation")
        acted = acted or msg.get("role") == "assistant"
        return {**ROLE_MAP, "user": "tool_result"} if observation else ROLE_MAP

    convert_messages(history, "history", path, drop_thinking, session, roles)


def _read_steps(steps: list, path: str, session: Session) -> None:
    for i, step in enumerate(steps):
        where = f"trajectory[{i}]."
        source: dict[str, Any] = {"file": path, "index": i, "field": "trajectory"}
        response = step.get("response") if isinstance(step, dict) else None
        if isinstance(response, str) and response:
            text = response
        else:
            thought = require(step, "thought", str, path, None, where)
            action = require(step, "action", str, path, None, where)
            text = "\n\n".join(p for p in (thought, action) if p)
        if text:
            session.records.append(record("assistant", text, source))
        else:
            session.skipped["empty assistant message"] += 1
        observation = require(step, "observation", (str, type(None)), path, None, where)
        session.records.append(record("tool_result", observation or "", dict(source)))
