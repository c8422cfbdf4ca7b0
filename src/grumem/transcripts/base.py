"""What every transcript reader shares: the Session it returns, record construction,
placeholders for opaque blobs, and how a file's first bytes are looked at for detection.

A record is `{role, text, source}`: role one of the chunk roles, text exactly what
will be rendered, source a pointer back into the transcript (file plus line,
message id or index) so a chunk can be traced to where it came from.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from grumem.core import json_text
from grumem.core.json_text import dumps
from grumem.errors import NestingError, RecordError
from grumem.io import jsonl
from grumem.io.jsonl import open_input

ROLES = ("user", "assistant", "tool_result", "system")

# Enough to see the first keys of any format; whole-document formats are parsed
# in full only when the head looks like JSON.
HEAD_BYTES = 1 << 16


class NotThisFormat:
    """A detector's refusal and why: false in a boolean test, and the reason is what
    `--format auto` shows, one line per format, when no format accepts a file."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"NotThisFormat({self.reason!r})"


Detection = bool | NotThisFormat


def kind_of(value: Any) -> str:
    """What a parsed value is, in the words a refusal uses."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    return f"a JSON {type(value).__name__}"


def is_not(subject: str, value: Any, wanted: str) -> str:
    """A refusal's reason: `the file is a JSON array, not <wanted>`."""
    if value is None:
        return f"{subject} is not JSON"
    return f"{subject} is {kind_of(value)}, not {wanted}"


@dataclass
class Session:
    """One conversation: its records in order, and what was left out, counted by kind."""

    id: str
    records: list[dict] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


class SessionStream:
    """Sessions made one at a time as they are iterated (a dataset of many thousand
    trajectories never sits in memory whole), with their count known before."""

    def __init__(self, count: int, sessions: Callable[[], Iterator[Session]]):
        self.count = count
        self._sessions = sessions

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Session]:
        return self._sessions()

    def map(self, f: Callable[[Session], Session]) -> SessionStream:
        return SessionStream(self.count, lambda: map(f, self._sessions()))


def record(role: str, text: str, source: dict[str, Any]) -> dict:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    return {"role": role, "text": text, "source": source}


def keep_session_info(session: Session, info: dict[str, Any]) -> None:
    """What a transcript says of the whole session (title, start and end, model,
    workspace) goes into its first record's source under `session`, the values it
    has only: records are the one place a chunk keeps where it came from."""
    kept = {k: v for k, v in info.items() if v is not None and v != ""}
    if kept and session.records:
        session.records[0]["source"] = {**session.records[0]["source"], "session": kept}


def tool_call_text(name: str, arguments: Any) -> str:
    """A tool call as the memory agent reads it: the tool's name, then its input as compact JSON."""
    return f"Tool call {name}: {dumps(arguments)}"


def tool_call_text_from_json(name: str, arguments: str) -> str:
    """Same, for APIs that carry the input as a JSON string (OpenAI). A string that is
    not valid JSON (models do emit those), or nests deeper than grumem reads, is
    shown as the model wrote it."""
    try:
        parsed = json_text.stdlib_loads(arguments)
    except json.JSONDecodeError:  # a NestingError is one
        return f"Tool call {name}: {arguments}"
    return tool_call_text(name, parsed)


def thinking_text(text: str) -> str:
    return f"Thinking: {text}"


def thinking_part(text: str, drop_thinking: bool, session: Session) -> str | None:
    """The rendered text of an Anthropic `thinking` block, or None (counted as skipped)
    when thinking is dropped or only its signature was kept."""
    if drop_thinking:
        session.skipped["thinking"] += 1
        return None
    if not text:  # a signature alone: the reasoning was not written to the log
        session.skipped["empty thinking"] += 1
        return None
    return thinking_text(text)


def blob_placeholder(kind: str, media_type: str, data: str, encoding: str = "base64") -> str:
    """One line standing for an opaque blob (an image, encrypted reasoning): what and how big."""
    return f"[{kind}: {media_type}, {len(data)} bytes {encoding}]"


def data_url_placeholder(kind: str, url: str) -> str:
    """A `data:` URL becomes a placeholder; a plain URL is kept as the model saw it."""
    if url.startswith("data:") and "," in url:
        header, data = url[5:].split(",", 1)
        media_type, _, enc = header.partition(";")
        return blob_placeholder(kind, media_type or "unknown", data, enc or "url-encoded")
    return f"[{kind}: {url}]"


def session_stem(path: str | os.PathLike[str], suffixes: tuple[str, ...]) -> str:
    """The file name without the first matching suffix (`x.traj.json` -> `x`)."""
    name = Path(path).name
    for suffix in suffixes:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def require(
    obj: Any, key: str, kind: type | tuple[type, ...], path: str, line: int | None, where: str = ""
) -> Any:
    """obj[key] checked for presence and type; RecordError naming the field otherwise."""
    name = f"{where}{key}"
    if not isinstance(obj, dict) or key not in obj:
        raise RecordError(path, line, name, "missing")
    value = obj[key]
    if not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RecordError(path, line, name, f"expected {want}, found {type(value).__name__}")
    return value


def load_json_document(path: str | os.PathLike[str]) -> Any:
    """A whole-file JSON document; syntax errors name the line."""
    with open_input(path) as f:
        data = f.read()
    parsed, doc = json_text.loads_if_orjson(data)
    if parsed:  # orjson refuses lone surrogates: the checks below would find none
        return json_text.shallow(doc, data, path, locate=True)
    try:
        text = data.decode("utf-8")
        doc = json_text.stdlib_loads(text, path, locate=True)
    except UnicodeDecodeError as e:
        raise RecordError(path, None, None, f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except NestingError:
        raise
    except json.JSONDecodeError as e:
        raise RecordError(path, e.lineno, None, f"bad JSON: {e.msg} at column {e.colno}") from None
    found = json_text.lone_surrogate(doc)
    if found:
        # the line of the first lone escape in the text: the walk knows the field, not the line
        m = _LONE_ESCAPE.search(text)
        line = None if m is None else text.count("\n", 0, m.start()) + 1
        json_text.check_no_lone_surrogate(path, line, doc)
    return doc


def load_json_object(path: str, holding: str) -> dict[str, Any]:
    """A whole-file JSON document that must be an object; `holding` says with what keys,
    for the error."""
    doc = load_json_document(path)
    if not isinstance(doc, dict):
        raise RecordError(path, None, None, f"expected a JSON object with {holding}")
    return doc


_HIGH, _LOW = r"\\u[dD][89abAB][0-9a-fA-F]{2}", r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE_ESCAPE = re.compile(rf"{_HIGH}(?!{_LOW})|(?<!{_HIGH}){_LOW}")


def iter_json_objects(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict]]:
    """(line number, object) for a JSON Lines file; bad lines name file and line."""
    for lineno, _, obj in jsonl.iter_json_lines(path):
        if not isinstance(obj, dict):
            why = f"expected a JSON object, found {type(obj).__name__}"
            raise RecordError(path, lineno, None, why)
        yield lineno, obj


class Head:
    """The start of a file, for format detection; the first line and the whole document
    are parsed lazily, once, and only if a detector asks."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = str(path)
        with open(path, "rb") as f:
            self.text = f.read(HEAD_BYTES).decode("utf-8", errors="replace")

    # A file of one line (a JSON document written compactly) is its first line: the one
    # parse serves both, or detection would hold two copies of the document.

    @cached_property
    def first_line(self) -> Any:
        """The first line as JSON, or None if it is not JSON (a NestingError if it
        nests deeper than any format's reader would read it)."""
        with open(self.path, "rb") as f:
            raw = f.readline()
            one_line = not f.read(1)
        value = _json_or_none(raw, self.path, 1)
        if one_line and self._looks_like_a_document:
            self.__dict__.setdefault("document", value)
        return value

    @cached_property
    def document(self) -> Any:
        """The whole file as one JSON document, or None if it is not one (a
        NestingError if it nests deeper than any format's reader would read it)."""
        if not self._looks_like_a_document:
            return None
        with open(self.path, "rb") as f:
            data = f.read()
        value = _json_or_none(data, self.path, locate=True)
        if data.find(b"\n", 0, len(data) - 1) < 0:  # one line
            self.__dict__.setdefault("first_line", value)
        return value

    @property
    def _looks_like_a_document(self) -> bool:
        return self.text.lstrip().startswith(("{", "["))


def _json_or_none(
    data: bytes, path: str | os.PathLike[str], line: int | None = None, locate: bool = False
) -> Any:
    """`data` as JSON (orjson, else the stdlib's reading), or None if it is not JSON; a
    NestingError if it nests past MAX_JSON_DEPTH."""
    parsed, value = json_text.loads_if_orjson(data)
    if parsed:
        return json_text.shallow(value, data, path, line, locate=locate)
    try:
        return json_text.stdlib_loads(data.decode("utf-8"), path, line, locate=locate)
    except NestingError:
        raise
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
