"""JSON text in and out, and the sha256 of text: parse with the nesting checked, the
one serialisation of records, and a lone surrogate named by its field.

Pure: no file is opened here (grumem.io.jsonl reads and writes the files, validates
against the schemas and writes atomically, through these). A path or line passed in
only names where the text came from in an error.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from array import array
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any

import orjson

from grumem.errors import GrumemError, NestingError, RecordError

if TYPE_CHECKING:
    from os import PathLike


# How deep arrays and objects may nest in any JSON (or YAML) grumem reads. The
# deepest nesting in the repository's transcripts and records is 10 (OpenHands
# events); the stdlib's parser and msgspec raise RecursionError at ~990 (Python's
# recursion limit less the caller's stack), PyYAML's pure-Python loader at ~490,
# and orjson refuses more than 1024 itself. 256 leaves the stack a reader is
# called from, and the recursive walks over a parsed value, their room.
MAX_JSON_DEPTH = 256


def nesting_why(depth: int | None, kind: str = "JSON") -> str:
    """The reason a NestingError gives (and the YAML loader's, grumem.config.settings)."""
    found = f"more than {MAX_JSON_DEPTH}" if depth is None else str(depth)
    return (
        f"{kind} nested {found} deep (arrays or objects inside each other); the limit is"
        f" {MAX_JSON_DEPTH} (grumem.core.json_text.MAX_JSON_DEPTH): no transcript or record nests"
        " that deep, check what wrote it"
    )


_CONTAINERS = frozenset({dict, list})


def value_depth(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value (0 for a scalar), one
    level at a time (no recursion), keeping only the containers of the next."""
    depth = 0
    level = [value] if type(value) in _CONTAINERS else []
    while level:
        depth += 1
        children = chain.from_iterable([v.values() if type(v) is dict else v for v in level])
        level = [c for c in children if type(c) in _CONTAINERS]
    return depth


# +1 for an opening bracket, -1 (0xff as a signed byte) for a closing one
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


# a string (its closing quote optional, so that every match consumes what it
# scanned and the scan stays linear on text that is not JSON) or a bracket
_TOKEN_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


_TOKEN_TEXT = re.compile(_TOKEN_BYTES.pattern.decode("ascii"), re.DOTALL)


def text_depth(text: str | bytes) -> tuple[int, int | None]:
    """(how deep arrays and objects nest in JSON text, the offset of the first bracket
    past MAX_JSON_DEPTH or None): its brackets outside strings counted in linear
    passes, no recursion. Text that is not JSON gets the depth of its brackets."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    # escapes removed (`\\` pairs first, as a parser reads them), every other
    # piece between quotes is outside the strings; C passes, then one over brackets
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(unescaped.split(b'"')[::2])
    steps = array("b", outside.translate(_STEPS, _NOT_BRACKETS))
    depth = max(accumulate(steps), default=0)
    if depth <= MAX_JSON_DEPTH:
        return max(depth, 0), None
    # where: token by token, as far as the first bracket past the limit
    level = 0
    tokens = _TOKEN_BYTES.finditer(text) if isinstance(text, bytes) else _TOKEN_TEXT.finditer(text)
    for m in tokens:
        c = m.group()[:1]
        if c in (b"[", b"{", "[", "{"):
            level += 1
            if level > MAX_JSON_DEPTH:
                return depth, m.start()
        elif c in (b"]", b"}", "]", "}"):
            level -= 1
    return depth, None


def nesting_error(
    text: str | bytes,
    path: str | PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
) -> NestingError:
    """The NestingError for `text`, known to nest too deep, with its depth; `locate`
    (the text is a whole file) names the line where it passes the limit."""
    depth, past = text_depth(text)
    at = (0, 1, 1)
    if past is not None:
        if isinstance(text, bytes):
            lines, last = text.count(b"\n", 0, past), text.rfind(b"\n", 0, past)
        else:
            lines, last = text.count("\n", 0, past), text.rfind("\n", 0, past)
        at = (past, lines + 1, past - last)
        if locate:
            line = at[1]
    found = depth if depth > MAX_JSON_DEPTH else None
    return NestingError(found, nesting_why(found), path, line, field, at)


def shallow(
    value: Any,
    text: str | bytes,
    path: str | PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
) -> Any:
    """`value` (parsed from `text`) when it nests at most MAX_JSON_DEPTH deep; else its
    NestingError. Each level takes two characters, so short text is not walked."""
    if len(text) > 2 * MAX_JSON_DEPTH and value_depth(value) > MAX_JSON_DEPTH:
        raise nesting_error(text, path, line, field, locate)
    return value


def sha256_text(text: str) -> str:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as e:
        # readers reject lone surrogates with file and line; this is the last guard
        raise GrumemError(
            f"text holds a lone surrogate {_escape(text[e.start])} at character {e.start}:"
            " not valid Unicode, it cannot be hashed or written"
        ) from None
    return hashlib.sha256(data).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# A UTF-16 surrogate escape: JSON allows `\ud83d` alone, Python decodes it to a
# string that cannot be encoded as UTF-8 (nor hashed, nor written back).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(ch: str) -> str:
    return f"\\u{ord(ch):04x}"


def lone_surrogate(value: Any, where: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(field path, escape) of the first string (key or value) holding a lone surrogate."""
    if isinstance(value, str):
        m = _SURROGATE.search(value)
        return None if m is None else (".".join(where), _escape(m.group()))
    if isinstance(value, dict):
        for k, v in value.items():
            found = lone_surrogate(k, (*where, k)) or lone_surrogate(v, (*where, k))
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = lone_surrogate(v, (*where, str(i)))
            if found:
                return found
    return None


def check_no_lone_surrogate(
    path: str | PathLike[str], line: int | None, obj: Any, raw: bytes | None = None
) -> None:
    """RecordError naming the field when a JSON value holds half a UTF-16 surrogate pair
    (common in text cut by JavaScript); `raw` lets clean lines skip the walk."""
    if raw is not None and not _SURROGATE_ESCAPE.search(raw):
        return
    found = lone_surrogate(obj)
    if found:
        field, esc = found
        raise RecordError(
            path,
            line,
            field or None,
            f"lone surrogate {esc} (half of a UTF-16 pair, as left by text cut in"
            " JavaScript): not valid Unicode; remove it or complete the pair",
        )


def json_line(path: str | PathLike[str], lineno: int, raw: bytes) -> Any:
    """One line of a JSON Lines file parsed, or a RecordError naming file and line
    (a NestingError when it nests deeper than MAX_JSON_DEPTH)."""
    try:
        if _long_digits(raw):
            raise orjson.JSONDecodeError("", "", 0)
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # orjson is ~5x faster but stricter (NaN, lone surrogates) and reads an
        # integer past 64 bits as a float: those lines the stdlib reads, or
        # explains
        obj = _loads_or_explain(path, lineno, raw)
    else:
        shallow(obj, raw, path, lineno)
    check_no_lone_surrogate(path, lineno, obj, raw)
    return obj


def _loads_or_explain(path: str | PathLike[str], lineno: int, raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        why = f"not UTF-8 ({e.reason} at byte {e.start})"
        raise RecordError(path, lineno, None, why) from None
    if not text.strip():
        raise RecordError(path, lineno, None, "blank line")
    try:
        return stdlib_loads(text, path, lineno)
    except NestingError:
        raise
    except json.JSONDecodeError as e:
        why = f"bad JSON: {e.msg} at column {e.colno}"
        raise RecordError(path, lineno, None, why) from None


def stdlib_loads(
    text: str | bytes,
    path: str | PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
) -> Any:
    """json.loads, the reference, with its nesting checked: a NestingError where it
    recurses past Python's limit (the text is scanned for its depth only then) or
    returns a value deeper than MAX_JSON_DEPTH. Location as for `loads`."""
    try:
        value = json.loads(text)
    except RecursionError:
        error = nesting_error(text, path, line, field, locate)
        if error.depth is None:
            raise  # not the text's depth: the caller's stack was already deep
        raise error from None
    return shallow(value, text, path, line, field, locate)


def loads(
    text: str | bytes,
    path: str | PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
    *,
    exact_integers: bool = True,
) -> Any:
    """JSON parsed by orjson, or by the stdlib (the reference) when orjson refuses it,
    so a caller sees the stdlib's value or its JSONDecodeError; nested
    deeper than MAX_JSON_DEPTH it is a NestingError, naming `path`, `line` and
    `field` when given (`locate`: the text is a whole file, name its line).

    Without `exact_integers` orjson may read an integer past 64 bits as a float
    (no string of a response body changes by that; the guard costs a pass)."""
    try:
        data = text.encode("utf-8") if isinstance(text, str) else text
    except UnicodeEncodeError:
        data = None  # a lone surrogate: the stdlib's to parse
    if data is not None and not (exact_integers and _long_digits(data)):
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            return shallow(value, text, path, line, field, locate)
    return stdlib_loads(text, path, line, field, locate)


def loads_if_orjson(data: bytes) -> tuple[bool, Any]:
    """(True, value) when orjson parses `data` to what the stdlib would; (False, None)
    when it refuses (bad UTF-8 or JSON, NaN, a lone surrogate) or may differ (an
    integer past 64 bits): then the stdlib is the one to read it, or to explain why not.

    orjson reads the bytes as they are: beside them it holds the value and a scratch
    copy of a string, where the stdlib needs the whole text decoded first (up to
    four bytes a character) and then the value beside both."""
    if _long_digits(data):
        return False, None
    try:
        return True, orjson.loads(data)
    except orjson.JSONDecodeError:
        return False, None


# every digit as "0", every other byte as "x": a C pass instead of a regex that
# costs ~200 µs on a 6 KB line
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else 0x78 for i in range(256))


def _long_digits(data: bytes) -> bool:
    """19 digits in a row: maybe an integer past 64 bits, which orjson reads as a
    float (in a string it only costs the stdlib's slower parse)."""
    return b"0" * 19 in data.translate(_DIGITS_AS_ZERO)


def dumps(record: Any) -> str:
    """The one JSON serialisation of records: compact, UTF-8, key order kept."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# orjson writes what the stdlib does for records except a few floats and types;
# those (and anything it refuses) go through `dumps`, the reference
_ORJSON_OPTS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps_bytes(record: Any) -> bytes:
    """`dumps(record)` as UTF-8 bytes, byte for byte, by orjson where it agrees (~10x faster)."""
    if _orjson_agrees(record):
        try:
            return orjson.dumps(record, option=_ORJSON_OPTS)
        except orjson.JSONEncodeError:
            pass  # a lone surrogate, a huge integer, a non-string key: the stdlib decides
    return dumps(record).encode("utf-8")


def _orjson_agrees(value: Any) -> bool:
    """False when `value` holds what orjson writes differently from json.dumps: a float
    below 1e-4 (0.00001 for 1e-05), NaN or infinity (null), a subclass of a JSON type."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return True
    if t is dict:
        return all(type(k) is str and _orjson_agrees(v) for k, v in value.items())
    if t is list or t is tuple:
        return all(_orjson_agrees(v) for v in value)
    if t is float:
        return value == 0.0 or (math.isfinite(value) and abs(value) >= 1e-4)
    return False
