"""JSON Lines read into, and written from, the record classes of grumem.records.

A line is decoded and checked in one C pass (msgspec) into its record class, which
mirrors its schema. A line the class refuses is not an error yet: it goes the
reference way (grumem.io.jsonl: orjson or the stdlib, the depth and surrogate
checks, then the schema), which names the file, line and field of what is wrong,
or accepts it (a NaN, say, which is no JSON to msgspec), and the record is made
from the value read. A record the schema accepts and its class does not (the
class is stricter only where the writers never go: `r_format: 1.0`) is refused
naming the field.
"""

from __future__ import annotations

import functools
import os
import typing
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import msgspec

from grumem.core.json_text import MAX_JSON_DEPTH, check_no_lone_surrogate, json_line
from grumem.errors import RecordError
from grumem.io.jsonl import atomic_writer, checked, iter_json_lines, open_input, validate
from grumem.records import schema_name
from grumem.records.base import JsonObject, Record, decoder, shape_error
from grumem.records.response import ResponseRecord

__all__ = ["checked_document", "decode_line", "encode_checked", "read_checked", "read_records"]
__all__ += ["read_responses", "write_records"]

R = TypeVar("R")


def read_records(path: str | os.PathLike[str], kind: type[R]) -> Iterator[tuple[int, R]]:
    """(line number, record) of a JSON Lines file of `kind`'s schema, streaming."""
    with open_input(path) as f:
        for lineno, raw in enumerate(f, start=1):
            yield lineno, decode_line(path, lineno, raw, kind)


def read_responses(path: str | os.PathLike[str]) -> Iterator[tuple[int, ResponseRecord]]:
    """(line number, record) of a responses file: exchanges and aborts, told apart by
    their `kind` tag."""
    # a union of record classes is no type[R] to mypy; read_records decodes it all the same
    return read_records(path, ResponseRecord)  # type: ignore[arg-type]


def decode_line(path: str | os.PathLike[str], lineno: int, raw: bytes, kind: type[R]) -> R:
    """One line as its record; a RecordError naming file, line and field if it is none."""
    # a class holding values of any shape (a chunk record's `source`) lets msgspec
    # recurse as deep as they nest: a line with more brackets than the depth limit
    # goes the reference way, which measures its depth
    # a class is hashable: mypy does not see it through the cache (python/mypy#11470)
    open_values = _open_values(kind)  # type: ignore[arg-type]
    if not (open_values and raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH):
        try:
            return typing.cast(R, decoder(kind).decode(raw))  # type: ignore[arg-type]
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
    value = checked(json_line(path, lineno, raw), schema_name(kind), path, lineno)
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as e:
        error = shape_error(e)
        raise RecordError(path, lineno, error.field, error.why) from None


def read_checked(path: str | os.PathLike[str], kind: Any) -> Iterator[tuple[int, Any]]:
    """(line number, the line's JSON value) of a file of open records, streaming: each
    value checked by its record class in C, and kept as read, so the keys of its own a
    record carries (a chunk's transcript records, a plugin's fields) pass through. A
    value the class refuses goes the reference way, as in decode_line."""
    name = schema_name(kind)
    for lineno, _, value in iter_json_lines(path):  # its depth and surrogates checked
        try:
            msgspec.convert(value, kind, strict=True)
        except msgspec.ValidationError as e:
            checked(value, name, path, lineno)
            error = shape_error(e)
            raise RecordError(path, lineno, error.field, error.why) from None
        yield lineno, value


def checked_document(value: Any, kind: type[R], path: str | os.PathLike[str]) -> R:
    """A JSON document (kappa.json, summary.json, a chunk manifest), parsed or about to be
    written, as its record; a RecordError naming the field if it is not one. The class
    checks it in C; the reference (jsonschema, ~80 ms to import) words what it refuses."""
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as e:
        validate(value, schema_name(kind), path)  # names the field, if it agrees
        error = shape_error(e)
        raise RecordError(path, None, error.field, error.why) from None


def write_records(path: str | os.PathLike[str], records: Iterable[Record], kind: Any) -> int:
    """Write records of `kind` atomically, one JSON line each as grumem.core.json_text.dumps
    writes it, each checked against its class (so its schema) first; return how many."""
    n = 0
    with atomic_writer(path, "wb") as f:
        for n, record in enumerate(records, start=1):
            f.write(encode_checked(record, kind, path, n))
            f.write(b"\n")
    return n


def encode_checked(
    record: Record, kind: Any, path: str | os.PathLike[str], line: int | None
) -> bytes:
    """The record's JSON line (no newline) as grumem.core.json_text.dumps writes it, checked
    against its class `kind` (so its schema) in one C pass: a record built wrong (a
    constructor checks no type) is a RecordError naming `path`, `line` and the field,
    before it is written."""
    try:
        data = record.encode()
    except UnicodeEncodeError:
        check_no_lone_surrogate(path, line, record.to_dict())  # names the field
        raise
    try:
        decoder(kind).decode(data)
    except msgspec.ValidationError as e:
        validate(record.to_dict(), schema_name(kind), path, line)  # names the field, if it agrees
        error = shape_error(e)
        raise RecordError(path, line, error.field, error.why) from None
    return data


@functools.cache
def _open_values(kind: Any) -> bool:
    """Whether records of `kind` may hold a JSON value of any shape (a JsonObject)."""
    return _holds_any(kind, frozenset())


def _holds_any(hint: Any, seen: frozenset[Any]) -> bool:
    if hint is Any or hint == JsonObject:
        return True
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        if hint in seen:
            return False
        hints = typing.get_type_hints(hint, include_extras=True)
        return any(_holds_any(h, seen | {hint}) for h in hints.values())
    return any(_holds_any(a, seen) for a in typing.get_args(hint) if a is not ...)
