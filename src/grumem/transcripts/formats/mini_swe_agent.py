"""mini-swe-agent trajectories (`<instance>.traj.json`): `{info, messages, trajectory_format}`.

`messages` are OpenAI chat messages. In the text-based format (v1, and v2
without tool calls) the action is a bash block inside the assistant text,
which is kept as written: it already shows the command. The command's output
comes back as a user message holding `<returncode>`/`<output>`; those become
tool_result records. Other user messages after the task (format errors,
timeouts) are the harness talking and stay user records, as the agent saw
them. v2 tool-call trajectories carry `tool_calls` and `tool` messages,
mapped as in the OpenAI reader. v2's final `exit` message (the submission)
was never sent to the model; it is kept as a system record because it is
the run's outcome.
"""

from __future__ import annotations

import os
import re
from typing import Any

from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    is_not,
    load_json_object,
    require,
    session_stem,
)
from grumem.transcripts.formats.openai_chat import ROLE_MAP, content_text, convert_messages

NAME = "mini-swe-agent"
# Where `grumem discover` looks (grumem.core.locations): `mini`'s last run, in its
# global config directory (platformdirs' user config directory; MSWEA_GLOBAL_CONFIG_DIR
# moves it). Batch runs write where their --output says: no fixed place
LOCATIONS = (
    "{XDG_CONFIG_HOME}/mini-swe-agent/last_mini_run.traj.json",
    "{APP_SUPPORT}/mini-swe-agent/last_mini_run.traj.json",
    "${MSWEA_GLOBAL_CONFIG_DIR}/last_mini_run.traj.json",
)
SUFFIXES = (".traj.json", ".json")
_OBSERVATION = re.compile(r"<returncode>|<output>")
_ROLES = {**ROLE_MAP, "exit": "system"}


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    doc = head.document
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return NotThisFormat(is_not("the file", doc, "an object with a messages list"))
    info = doc.get("info")
    if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent") or (
        isinstance(info, dict) and "mini_version" in info
    ):
        return True
    return NotThisFormat("no trajectory_format 'mini-swe-agent*' and no info.mini_version")


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    doc = load_json_object(path, "'messages'")
    messages = require(doc, "messages", list, path, None)
    session = Session(session_stem(path, SUFFIXES))
    seen_task = False

    def roles(i: int, msg: dict[str, Any]) -> dict[str, str]:
        """A user message after the task that holds a command's output is its tool_result."""
        nonlocal seen_task
        if msg.get("role") != "user":
            return _ROLES
        text = content_text(msg.get("content"), f"messages[{i}].content", path)
        observation = seen_task and _OBSERVATION.search(text) is not None
        seen_task = True
        return {**_ROLES, "user": "tool_result"} if observation else _ROLES

    convert_messages(messages, "messages", path, drop_thinking, session, roles)
    return [session]
