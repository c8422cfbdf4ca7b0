"""Agent transcripts in, sessions of `{role, text, source}` records out: one module per format.

Each format module has `NAME`, `detect(path, head) -> bool` and
`read(path, drop_thinking) -> list[Session]`. `--format auto` tries them in
the order of FORMATS: line-based formats first (cheap: one line), then the
whole-document ones, mini-swe-agent before the OpenAI messages it is a
special case of.
"""

from __future__ import annotations

import hashlib
import os
import re
from types import ModuleType

from grumem.errors import GrumemError
from grumem.jsonl import RecordError, open_input
from grumem.transcripts import (
    aider,
    claude_code,
    codex_cli,
    gemini_cli,
    mini_swe_agent,
    openai_chat,
    openhands,
    records,
    swe_agent,
)
from grumem.transcripts.base import HEAD_BYTES, Head, Session

__all__ = [
    "FORMATS",
    "Session",
    "UnknownFormatError",
    "detect_format",
    "read_transcript",
    "sanitize_session_id",
]

FORMATS: dict[str, ModuleType] = {
    m.NAME: m
    for m in (
        claude_code,
        records,
        mini_swe_agent,
        swe_agent,
        openai_chat,
        openhands,
        codex_cli,
        aider,
        gemini_cli,
    )
}

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class UnknownFormatError(GrumemError, ValueError):
    pass


def detect_format(path: str | os.PathLike[str]) -> str:
    """The name of the first format whose detector accepts the file."""
    head = Head(path)
    for name, module in FORMATS.items():
        if module.detect(path, head):
            return name
    raise UnknownFormatError(
        f"{path}: not a transcript format grumem knows; tried {', '.join(FORMATS)}. "
        "Name the format with --format, or convert the file to records JSONL "
        '({"role": ..., "text": ...} per line).'
    )


def read_transcript(
    path: str | os.PathLike[str], fmt: str = "auto", drop_thinking: bool = False
) -> tuple[str, list[Session]]:
    """(format, sessions) of one transcript file; session ids are made safe as file names.

    An empty file is an error, whatever the format: read as zero sessions it
    would end the chunk job successfully with no chunk file, and the project
    would lose the session without a word (a file cut by a full disk, a copy
    that failed)."""
    if os.path.isdir(path):
        raise RecordError(
            path, None, None, f"is a directory: give the transcript files in it ({path}/*.jsonl)"
        )
    with open_input(path) as f:
        # `all` stops at the first block holding more than white space
        empty = all(not block.strip() for block in iter(lambda: f.read(HEAD_BYTES), b""))
    if empty:
        raise RecordError(path, None, None, "empty file: no transcript to chunk")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in FORMATS:
        raise UnknownFormatError(
            f"unknown format {fmt!r}; expected auto or one of {', '.join(FORMATS)}"
        )
    sessions = FORMATS[fmt].read(path, drop_thinking)
    for s in sessions:
        s.id = sanitize_session_id(s.id)
    return fmt, sessions


def sanitize_session_id(raw: str) -> str:
    """`[A-Za-z0-9_.-]` only, and no leading dot, so the id is a safe, visible file name.

    A safe id is kept; another gets a hash of itself, so that ids which render
    alike (`会话` and `会议` both render `__`) stay distinct sessions."""
    if not raw:
        raise GrumemError("empty session id")
    safe = re.sub(r"^\.", "_", _UNSAFE.sub("_", raw))
    if safe == raw:
        return safe
    return f"{safe}-{hashlib.sha256(raw.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"
