"""Agent transcripts in, sessions of `{role, text, source}` records out: one module per format.

Each format module has `NAME`, `detect(path, head)` and `read(path,
drop_thinking)`; `detect` returns True or a `NotThisFormat(reason)`, and
`read` returns a list of Sessions or a SessionStream (a dataset read one
row at a time). A format with options (the trajectory dataset's field
names) lists them in `OPTIONS` and `read` takes them as keyword arguments.

`--format auto` tries the built-ins in the order of FORMATS: line-based
formats first (cheap: one line), then the whole-document ones: the
documents of one tool that name themselves (Continue, Cline 4, Amp) before
SWE-agent's (any object with a `history`) and Anthropic's and OpenAI's
messages (any object with `messages`), mini-swe-agent before the OpenAI
messages it is a special case of, and Anthropic messages before OpenAI's
where the two shapes overlap; then the SQLite stores (one header check
refuses any other file) and Goose's JSONL, each told apart by its tables or
first line. Then it
tries the formats other packages register under the entry point group
`grumem.transcript_formats` (PLUGIN_GROUP): an entry point names a module
(or any object) with the same NAME, detect and read.

Discovery (`grumem discover`, grumem.tools.discover): a format whose tool keeps
its logs in a fixed place lists it in `LOCATIONS`, globs with the placeholders
of grumem.core.locations (`~`, `{XDG_DATA_HOME}`, `{XDG_CONFIG_HOME}`,
`{APP_SUPPORT}`, `{VSCODE_USER}`, `${VAR}`). Each matched file counts as one
session, unless the module has `count_sessions(path) -> int | None`: the sessions
a store holds (a SQLite database's rows, counted read-only and cheaply, opened
`file:...?mode=ro&immutable=1`), or None when only its reader could tell.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from grumem.errors import GrumemError, RecordError, UnknownFormatError
from grumem.io.jsonl import open_input
from grumem.transcripts.base import HEAD_BYTES, Head, NotThisFormat, Session, SessionStream
from grumem.transcripts.formats import (
    aider,
    amp,
    anthropic,
    claude_code,
    cline,
    codex_cli,
    continue_dev,
    copilot_chat,
    copilot_cli,
    cursor,
    gemini_cli,
    goose,
    grumem_records,
    kilo,
    mini_swe_agent,
    openai_chat,
    opencode,
    openhands,
    swe_agent,
    trajectory_dataset,
    zed,
)

__all__ = [
    "FORMATS",
    "PLUGIN_GROUP",
    "NotThisFormat",
    "Session",
    "SessionStream",
    "all_formats",
    "UnknownFormatError",
    "detect_format",
    "read_transcript",
    "sanitize_session_id",
]

FORMATS: dict[str, Any] = {
    m.NAME: m
    for m in (
        claude_code,
        copilot_cli,
        copilot_chat,
        grumem_records,
        continue_dev,
        cline,
        amp,
        mini_swe_agent,
        swe_agent,
        anthropic,
        openai_chat,
        openhands,
        codex_cli,
        aider,
        gemini_cli,
        goose,
        cursor,
        opencode,
        kilo,
        zed,
        trajectory_dataset,
    )
}
PLUGIN_GROUP = "grumem.transcript_formats"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@cache
def plugin_formats() -> dict[str, Any]:
    """The formats installed packages add under PLUGIN_GROUP, by NAME, in entry point order."""
    found: dict[str, Any] = {}
    for ep in entry_points(group=PLUGIN_GROUP):
        where = f"transcript format plugin {ep.name} = {ep.value}"
        try:
            fmt = ep.load()
        except Exception as e:  # a broken plugin must name itself, not fail as grumem
            raise GrumemError(f"{where}: cannot be loaded: {type(e).__name__}: {e}") from e
        if getattr(fmt, "NAME", None) != ep.name:
            raise GrumemError(
                f"{where}: its NAME {getattr(fmt, 'NAME', None)!r} is not {ep.name!r}"
            )
        if not (callable(getattr(fmt, "detect", None)) and callable(getattr(fmt, "read", None))):
            raise GrumemError(f"{where}: needs a detect and a read function")
        if ep.name in FORMATS or ep.name in found or ep.name == "auto":
            raise GrumemError(f"{where}: the format name {ep.name!r} is already taken")
        found[ep.name] = fmt
    return found


def all_formats() -> dict[str, Any]:
    """Built-ins first, then plugins: the order `--format auto` tries them in."""
    return {**FORMATS, **plugin_formats()}


def detect_format(path: str | os.PathLike[str]) -> str:
    """The name of the first format whose detector accepts the file; otherwise an error
    listing every format tried and why it refused, one line each."""
    head = Head(path)
    refusals = []
    for name, module in all_formats().items():
        verdict = module.detect(path, head)
        if verdict:
            return name
        why = verdict.reason if isinstance(verdict, NotThisFormat) else "its detect said no"
        refusals.append(f"  {name}: {why}")
    raise UnknownFormatError(
        f"{path}: not a transcript format grumem knows; tried, and why each refused:\n"
        + "\n".join(refusals)
        + "\nName the format with --format, or convert the file to records JSONL "
        '({"role": ..., "text": ...} per line).'
    )


def read_transcript(
    path: str | os.PathLike[str],
    fmt: str = "auto",
    drop_thinking: bool = False,
    options: Mapping[str, Any] | None = None,
) -> tuple[str, list[Session] | SessionStream]:
    """(format, sessions) of one transcript file; session ids are made safe as file names.

    An empty file is an error, whatever the format: read as zero sessions it
    would end the chunk job successfully with no chunk file, and the project
    would lose the session without a word (a file cut by a full disk, a copy
    that failed).

    `options` (None values left out) reach the formats that list them in
    OPTIONS; under `auto` a file of another format is read without them."""
    if os.path.isdir(path):
        raise RecordError(
            path, None, None, f"is a directory: give the transcript files in it ({path}/*.jsonl)"
        )
    with open_input(path) as f:
        # `all` stops at the first block holding more than white space
        empty = all(not block.strip() for block in iter(lambda: f.read(HEAD_BYTES), b""))
    if empty:
        raise RecordError(path, None, None, "empty file: no transcript to chunk")
    formats = all_formats()
    if fmt != "auto" and fmt not in formats:
        raise UnknownFormatError(
            f"unknown format {fmt!r}; expected auto or one of {', '.join(formats)}"
        )
    given = {k: v for k, v in (options or {}).items() if v is not None}
    if fmt != "auto":
        unknown = sorted(set(given) - set(getattr(formats[fmt], "OPTIONS", ())))
        if unknown:
            raise UnknownFormatError(f"format {fmt} takes no option {', '.join(unknown)}")
    if fmt == "auto":
        fmt = detect_format(path)
    module = formats[fmt]
    wanted = {k: v for k, v in given.items() if k in getattr(module, "OPTIONS", ())}
    sessions = module.read(path, drop_thinking, **wanted)
    if isinstance(sessions, SessionStream):
        return fmt, sessions.map(_sanitized)
    return fmt, [_sanitized(s) for s in sessions]


def _sanitized(session: Session) -> Session:
    session.id = sanitize_session_id(session.id)
    return session


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
