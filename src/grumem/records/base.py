"""The base of every record class: a frozen msgspec Struct, decoded and checked in C.

A record class mirrors its schema (workflow/schemas/<name>.schema.yaml) field for
field, in the schema's property order, which is the order the writers emit keys
(tests/records hold each class against its schema, both ways):

- a property the schema requires is a field without a default; one it does not
  require defaults to ABSENT (msgspec's UNSET), which encoding leaves out, so a
  missing key and a null stay apart;
- a nullable property has None in its type; an enum or a const of strings,
  integers or booleans is a Literal; minimum, minLength, minItems and pattern are
  msgspec.Meta constraints (a pattern's `$` is `\\Z`: the compiled check every
  reader and writer runs refuses a final newline);
- `integer` is int (2.0 and true are not), `number` is int | float (an integer read
  stays one, and is written back as one);
- a closed object (additionalProperties: false) is a record class refusing unknown
  keys; an open one is a record class of the keys the schema names that reads past
  any other (they are not written back: no writer emits them), or a JsonObject
  where the schema names none;
- what a Struct cannot type (an enum of floats, the gate's if/then) is checked in
  `__post_init__`, which msgspec runs on every decode, convert and construction.

Records are frozen (no field is reassigned); arrays are lists, as JSON gives them,
so `to_dict` is the JSON value itself. A field is read as an attribute (`r.body`),
checked by mypy where the code is typed; an optional one the record does not have
is ABSENT (`or_none` reads it as None).
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, Self, TypeAlias, TypeVar

import msgspec

from grumem.errors import RecordShapeError

__all__ = [
    "ABSENT",
    "Absent",
    "Count",
    "JsonObject",
    "NonEmpty",
    "Number",
    "Positive",
    "Record",
    "Sha256",
    "SplitName",
    "decoder",
    "or_none",
    "shape_error",
]

Absent: TypeAlias = msgspec.UnsetType
ABSENT = msgspec.UNSET  # a property the record does not have (not the same as null)

JsonObject: TypeAlias = dict[str, Any]  # an object whose keys the schema leaves open
Count = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
Sha256 = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}\Z")]
Number: TypeAlias = int | float
# a session's split (grumem.core.split), in every exported row
SplitName: TypeAlias = Literal["train", "val", "test"]

T = TypeVar("T")


def or_none(value: T | Absent) -> T | None:
    """An optional field's value, None where the record does not have it (ABSENT)."""
    return None if isinstance(value, msgspec.UnsetType) else value


class Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A record of one schema; subclasses are its closed objects, in the schema's order."""

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        """The record of one JSON text, checked as its schema; RecordShapeError if it is not."""
        try:
            return typing.cast(Self, decoder(cls).decode(data))
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            raise shape_error(e) from None

    @classmethod
    def convert(cls, value: Any) -> Self:
        """The record of a parsed JSON value (dicts, lists), checked as its schema."""
        try:
            return msgspec.convert(value, cls, strict=True)
        except msgspec.ValidationError as e:
            raise shape_error(e) from None

    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON value the writers emit: keys in field order, ABSENT left out."""
        return typing.cast(dict[str, Any], msgspec.to_builtins(self))

    def encode(self) -> bytes:
        """The record's JSON line (no newline) as grumem.core.json_text.dumps writes it, byte
        for byte: msgspec's encoder where it writes the same, the stdlib's where a float
        would be written otherwise (below 1e-4 or from 1e16 on, not finite)."""
        if _floats_agree(self):
            return msgspec.json.encode(self)
        text = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8")


@functools.cache
def decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    """The one JSON decoder of a record class (or a union of them, tagged)."""
    return msgspec.json.Decoder(kind)


_AT = re.compile(r"^(?P<why>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_NAMED = re.compile(r"(?:unknown|required) field `(?P<name>[^`]+)`")


def shape_error(e: msgspec.MsgspecError) -> RecordShapeError:
    """msgspec's error as a RecordShapeError naming the field as the schema's errors do
    (`turns.0.earlier_asks.0.parsed`)."""
    m = _AT.match(str(e))
    assert m is not None  # the pattern matches any text
    why, at = m["why"], m["path"] or ""
    parts = [p for p in re.split(r"[.\[\]]", at) if p]
    named = _NAMED.search(why)
    if named:
        parts.append(named["name"])
    return RecordShapeError(".".join(parts) or None, why[:1].lower() + why[1:])


# --- encoding: where msgspec and the stdlib write a float differently ---------------------


def _floats_agree(record: Record) -> bool:
    """False when `record` holds a float msgspec writes otherwise than json.dumps. Only
    the fields that may hold one are looked at, each class's in one C call (an export
    writes ~20 records a trajectory: the walk is a third of Record.encode's time)."""
    get = _FLOAT_GETTERS.get(type(record))
    if get is None:
        get = _FLOAT_GETTERS[type(record)] = _float_getter(type(record))
    return _all_agree(get(record))


def _all_agree(values: Iterable[Any]) -> bool:
    for v in values:
        t = type(v)
        if t is float:
            if not (v == 0.0 or (_isfinite(v) and 1e-4 <= abs(v) < 1e16)):
                return False
        elif v is None or t is str or t is int or t is bool or v is ABSENT:
            continue
        elif t is list or t is tuple:
            if not _all_agree(v):
                return False
        elif isinstance(v, Record):
            if not _floats_agree(v):
                return False
        elif t is dict:
            if not _all_agree(v.values()):
                return False
        else:
            return False  # not a JSON value: the stdlib decides (and refuses)
    return True


_isfinite = math.isfinite
_FLOAT_GETTERS: dict[type[Record], Callable[[Record], tuple[Any, ...]]] = {}


def _float_getter(cls: type[Record]) -> Callable[[Record], tuple[Any, ...]]:
    """The values of the fields of `cls` that may hold a float, as a tuple."""
    names = _float_fields(cls)
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda record: (one(record),)
    if not names:
        return lambda record: ()
    return operator.attrgetter(*names)


@functools.cache
def _float_fields(cls: type[Record]) -> tuple[str, ...]:
    """The fields of `cls` that may hold a float, at any depth (the rest need no look)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple(name for name in cls.__struct_fields__ if _may_hold_float(hints[name]))


def _may_hold_float(hint: Any, seen: frozenset[Any] = frozenset()) -> bool:
    if hint is float or hint is Any:
        return True
    if isinstance(hint, type) and issubclass(hint, Record):
        if hint in seen:
            return False
        inner = typing.get_type_hints(hint, include_extras=True)
        return any(_may_hold_float(h, seen | {hint}) for h in inner.values())
    origin = typing.get_origin(hint)
    if origin is Literal:
        return any(isinstance(v, float) for v in typing.get_args(hint))
    if origin in (Annotated, typing.Union, types.UnionType, tuple, list, dict):
        return any(_may_hold_float(a, seen) for a in typing.get_args(hint) if a is not ...)
    return False
