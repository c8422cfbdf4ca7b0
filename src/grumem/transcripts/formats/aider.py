"""aider chat histories (`.aider.chat.history.md`, in the root of each project aider ran in).

Read from aider's own writer (aider/io.py `InputOutput`, aider 0.86): the file
is Markdown appended to by every run, and each line's kind is its prefix.

- `# aider chat started at <YYYY-MM-DD HH:MM:SS>` starts a session: one
  Session per header, named `<project>-<n>` (n counts the headers from 1;
  the file is only appended to, so a session keeps its number). The
  project is the folder holding `.aider.chat.history.md`, or, for a file
  renamed `<project>.aider.chat.history.md` or `<project>.md`, `<project>`.
  A session with no record (aider started and quit) is left out and
  counted as `empty session` on the file's first session.
- `#### ` lines are what the user typed, one line per input line (a
  multi-line prompt repeats the prefix); a run of them is one user record.
  aider writes an empty input as `<blank>`, which is kept as written.
- `> ` lines (and a bare `>`, an empty line of output) are what aider
  itself printed: command output, confirmations, errors, lint and test
  results. A run of them is one tool_result record.
- Every other line is the model's answer: a run of them is one assistant
  record, without the blank lines around it (aider writes a blank line
  before and after each answer, so these are separators, not text).
- aider ends every `#### ` and `> ` line with two spaces (a Markdown hard
  line break); those two spaces are removed, and the rest of the line is
  kept as written. Lines may end in CRLF (aider's `--line-endings crlf`).
- Reasoning, when the model streams it, sits in the answer as a
  `<thinking-content-…>` block; it becomes a `Thinking: ` part of the
  assistant record, kept unless drop_thinking (then counted as `thinking`).
  A block that was never closed (the run was cut) stays answer text.

Lines are classified by prefix only, as aider's own reader
(`split_chat_history_markdown` in aider/utils.py) does: an answer line that
starts with `> ` (a Markdown quote) or `#### ` cannot be told apart from
tool output or user input, and is read as those.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from grumem.errors import RecordError
from grumem.io.jsonl import open_input
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    record,
    session_stem,
    thinking_text,
)

NAME = "aider"
HEADER = "# aider chat started at "
FILE_NAME = ".aider.chat.history.md"
_HARD_BREAK = "  "
_THINKING = re.compile(r"<(thinking-content-[0-9A-Za-z]+)>(.*?)</\1>", re.DOTALL)


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    first = next((line for line in head.text.splitlines() if line.strip()), "")
    if first.startswith(HEADER):
        return True
    return NotThisFormat(f"the first line does not start with {HEADER.strip()!r}")


def _kind(line: str) -> str:
    if line.startswith(HEADER):
        return "header"
    if line == "####" or line.startswith("#### "):
        return "user"
    if line == ">" or line.startswith("> "):
        return "tool_result"
    return "assistant"


def _unprefix(line: str, prefix: str) -> str:
    """A `#### ` or `> ` line as typed or printed: hard break and prefix removed."""
    if line.endswith(_HARD_BREAK):
        line = line[: -len(_HARD_BREAK)]
    return line[len(prefix) :] if line.startswith(prefix) else line[len(prefix.rstrip()) :]


def project_name(path: str | os.PathLike[str]) -> str:
    p = Path(path).resolve()
    if p.name == FILE_NAME and p.parent.name:
        return p.parent.name
    return session_stem(p, (FILE_NAME, ".md"))


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    with open_input(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise RecordError(path, line, None, f"not UTF-8 ({e.reason} at byte {e.start})") from None
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    project = project_name(path)
    sessions: list[Session] = []
    # the current run of lines of one kind: (kind, first line number, lines)
    run: tuple[str, int, list[str]] | None = None

    def flush() -> None:
        if run is None:
            return
        kind, start, body = run
        session = sessions[-1]
        source = {"file": path, "line": start}
        if kind == "assistant":
            _add_answer(session, body, source, drop_thinking)
        else:
            prefix = "#### " if kind == "user" else "> "
            text = "\n".join(_unprefix(x, prefix) for x in body)
            session.records.append(record(kind, text, source))

    for lineno, line in enumerate(lines, start=1):
        kind = _kind(line)
        if kind == "header":
            flush()
            run = None
            sessions.append(Session(f"{project}-{len(sessions) + 1}"))
            continue
        if not sessions:
            if not line.strip():
                continue
            raise RecordError(
                path,
                lineno,
                None,
                f"text before the first '{HEADER.strip()}' line: not an aider "
                "chat history, or its start was cut",
            )
        if run is not None and run[0] == kind:
            run[2].append(line)
            continue
        flush()
        run = (kind, lineno, [line])
    flush()
    # a run quit before anything was said leaves a header alone: nothing to chunk
    kept = [s for s in sessions if s.records]
    if kept and len(kept) < len(sessions):
        kept[0].skipped["empty session"] += len(sessions) - len(kept)
    return kept


def _add_answer(session: Session, body: list[str], source: dict, drop_thinking: bool) -> None:
    """One assistant record from a run of answer lines; blank lines around it are separators."""
    while body and not body[0].strip():
        body = body[1:]
        source = {**source, "line": source["line"] + 1}
    while body and not body[-1].strip():
        body = body[:-1]
    if not body:
        return
    text = "\n".join(body)
    parts: list[str] = []
    pos = 0
    for m in _THINKING.finditer(text):
        parts.append(text[pos : m.start()].strip("\n"))
        if drop_thinking:
            session.skipped["thinking"] += 1
        else:
            parts.append(thinking_text(m.group(2).strip("\n")))
        pos = m.end()
    parts.append(text[pos:].strip("\n"))
    parts = [p for p in parts if p]
    if parts:
        session.records.append(record("assistant", "\n\n".join(parts), source))
