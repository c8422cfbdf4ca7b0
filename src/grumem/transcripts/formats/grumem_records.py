"""Our own records JSONL: one `{role, text}` per line, for transcripts of any other origin.

The file is one session named after the file. Roles are the chunk roles
(`user`, `assistant`, `tool_result`, `system`). Other fields on a line are
ignored; the source pointer is the file and line.
"""

from __future__ import annotations

import os

from grumem.errors import RecordError
from grumem.transcripts.base import (
    ROLES,
    Detection,
    Head,
    NotThisFormat,
    Session,
    is_not,
    iter_json_objects,
    record,
    require,
    session_stem,
)

NAME = "records"
SUFFIXES = (".jsonl", ".json")


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    obj = head.first_line
    if not isinstance(obj, dict):
        return NotThisFormat(is_not("the first line", obj, "a JSON object"))
    if obj.get("role") not in ROLES or not isinstance(obj.get("text"), str):
        return NotThisFormat("the first line is not {role, text} with a chunk role")
    return True


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    session = Session(session_stem(path, SUFFIXES))
    for line, obj in iter_json_objects(path):
        role = require(obj, "role", str, path, line)
        if role not in ROLES:
            raise RecordError(
                path, line, "role", f"unknown role {role!r}; expected one of {', '.join(ROLES)}"
            )
        text = require(obj, "text", str, path, line)
        session.records.append(record(role, text, {"file": path, "line": line}))
    return [session]
