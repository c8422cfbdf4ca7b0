"""Typed records of the turn log and the corpus: the log line, the trajectory and its turn.

The JSON Schemas in workflow/schemas/ (log.schema.yaml, trajectory.schema.yaml)
stay the contract; these frozen dataclasses mirror them field for field, in
the order the writers emit keys, and tests/test_record_types.py checks that
the two agree. So `LogLine.from_dict(rec).to_dict()` gives back `rec` exactly:
the same keys in the same order, the same values.

- A property the schema requires is a field without a default; one it does
  not require (the log's `response_model`, absent from logs written before
  it existed) defaults to ABSENT, which to_dict leaves out, so a missing key
  and a null stay apart.
- A nullable property has `None` in its type.
- An object the schema closes (`additionalProperties: false`) is a dataclass;
  one it leaves open (a recorded request or response, an abort, a parse
  error) is a JsonObject, kept as read, so no key it carries is lost.
- Arrays are tuples (the records are frozen); to_dict gives lists back.

from_dict checks the shape (keys, nesting), naming the JSON path of what is
wrong; value types are the schema's job: validate a record at the boundary
before it is typed.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self, TypeAlias

from grumem.errors import GrumemError

JsonObject: TypeAlias = dict[str, Any]  # a JSON object the schema leaves open, as read


class Absent(enum.Enum):
    """The marker of a property the record does not have (not the same as null)."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent.ABSENT


class RecordShapeError(GrumemError):
    """A dict that is not the record's shape, naming the JSON path of the first problem."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path or '(record)'}: {message}")


# a dataclass itself (with no fields), so that dataclasses.fields accepts its subclasses
@dataclass(frozen=True)
class Record:
    """from_dict/to_dict for the frozen dataclasses below, driven by their type hints."""

    __slots__ = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "") -> Self:
        """The typed record of a schema-valid dict; `path` prefixes error locations."""
        if not isinstance(data, Mapping):
            raise RecordShapeError(path, f"expected an object, got {type(data).__name__}")
        plan = _plan(cls)  # type: ignore[arg-type]  # a class is hashable: python/mypy#11470
        unknown = [k for k in data if k not in plan]
        if unknown:
            raise RecordShapeError(_join(path, unknown[0]), f"unknown field of {cls.__name__}")
        values = {}
        for name, (required, load, _) in plan.items():
            if name in data:
                values[name] = load(data[name], _join(path, name))
            elif required:
                raise RecordShapeError(_join(path, name), f"missing field of {cls.__name__}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The record as the writers emit it: keys in field order, ABSENT ones left out."""
        out = {}
        for name, (_, _, dump) in _plan(type(self)).items():  # type: ignore[arg-type]  # as above
            value = getattr(self, name)
            if value is not ABSENT:
                out[name] = dump(value)
        return out


# --- the log line (workflow/schemas/log.schema.yaml) -------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEarlierAsk(Record):
    """An ask of a turn before its last: a recorded exchange the loop did not act on."""

    ask: int
    request: JsonObject
    response: JsonObject
    content: str | None
    finish_reason: str | None
    parsed: bool
    parse_error: JsonObject | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LogLine(Record):
    """One turn of log.jsonl, the boundary the export reads (order as grumem log writes it)."""

    trajectory_id: str
    project: str
    query_id: str
    session: str
    sample: int
    level: Literal["L1", "L2"]
    model: str
    response_model: str | None | Literal[Absent.ABSENT] = ABSENT
    t: int
    chunk_sha: str
    status: Literal["ok", "aborted"]
    abort: JsonObject | None
    asks: int
    earlier_asks: tuple[LogEarlierAsk, ...]
    memory_before: str | None
    memory_after: str | None
    request: JsonObject | None
    response: JsonObject | None
    content: str | None
    finish_reason: str | None
    parsed: bool
    update_gate: bool | None
    exit_gate: bool | None
    candidate: str | None
    think: str | None
    parse_error: JsonObject | None


# --- the corpus trajectory (workflow/schemas/trajectory.schema.yaml) ---------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage(Record):
    role: str
    content: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEarlierAsk(Record):
    """An ask before the turn's last, as the corpus keeps it (each makes r_format 0)."""

    ask: int
    request_sha256: str
    response: str | None
    parsed: Literal[False]
    parse_error: JsonObject | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn(Record):
    """One trainable turn: the recorded prompt and response, the gates and r_update."""

    t: int
    prompt: tuple[ChatMessage, ...]
    response: str | None
    r_update: Literal[1, -1]
    parsed: bool
    chunk_sha: str
    label: bool
    update_gate: bool | None
    exit_gate: bool | None
    attempt: int
    asks: int
    earlier_asks: tuple[TurnEarlierAsk, ...]
    request_sha256: str
    response_model: str | None
    advantage: float | None
    advantage_traj: float | None
    advantage_turn: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Aborted(Record):
    """Where and why a trajectory was cut short (its abort line is not a turn)."""

    t: int
    reason: Literal["budget", "request_failed"]
    component: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory(Record):
    """One line of corpus/trajectories.jsonl (card 004), in the export's key order."""

    trajectory_id: str
    turns: tuple[Turn, ...]
    r_exit: float | None  # 0, -0.75 or -0.5: float values cannot be a typing.Literal
    r_exit_reason: Literal["no_evidence", "aborted", "no_exit_gate"] | None
    r_format: Literal[0, 1]
    r_outcome: None
    t_exit: int | None
    t_last_evidence: int | None
    project: str
    query_id: str
    session: str
    sample: int
    level: Literal["L1", "L2"]
    model: str
    aborted: Aborted | None


# --- conversion, planned once per class from its type hints -------------------------------

Load = Callable[[Any, str], Any]
Dump = Callable[[Any], Any]


@functools.cache
def _plan(cls: type[Record]) -> dict[str, tuple[bool, Load, Dump]]:
    """Per field, in order: required?, and how to load and dump its value."""
    hints = typing.get_type_hints(cls)
    plan = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan[f.name] = (required, *_converters(hints[f.name]))
    return plan


def _converters(hint: Any) -> tuple[Load, Dump]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kinds = [_converters(a) for a in args if a is not type(None)]
        if all(k == (_keep, _same) for k in kinds):
            return _keep, _same
        if len(kinds) > 1:  # a value's type would have to be guessed from its shape
            raise TypeError(f"{hint}: a record or an array may only be unioned with None")
        load, dump = kinds[0]
        return (lambda v, p: None if v is None else load(v, p)), (
            lambda v: None if v is None else dump(v)
        )
    if origin is tuple:
        load_item, dump_item = _converters(args[0])

        def load_array(value: Any, path: str) -> tuple[Any, ...]:
            if not isinstance(value, list | tuple):
                raise RecordShapeError(path, f"expected an array, got {type(value).__name__}")
            return tuple(load_item(v, _join(path, str(i))) for i, v in enumerate(value))

        return load_array, lambda v: [dump_item(x) for x in v]
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_dict, lambda v: v.to_dict()
    return _keep, _same


def _keep(value: Any, path: str) -> Any:
    return value


def _same(value: Any) -> Any:
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
