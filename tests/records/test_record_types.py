"""grumem.record_types against the JSON Schemas they mirror (log, trajectory).

The schemas stay the contract. `disagreements` walks a record class and its
schema side by side: every property is a field and every field a property, in
the schema's order (the writers' key order); required-ness is no-default-ness;
nullability is `None` in the type; enums are Literals; closed objects are
record classes, open ones JsonObject. Records generated from the schema itself,
the export fixture's log, a real `grumem log` and a real export round-trip to the
same bytes."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps
from grumem.io.jsonl import schema, validate
from grumem.record_types import (
    ABSENT,
    Absent,
    JsonObject,
    LogLine,
    Record,
    RecordShapeError,
    Trajectory,
)
from support.checkout import FIXTURES_DIR

PAIRS = {"log": LogLine, "trajectory": Trajectory}
EXPORT_FIXTURE = FIXTURES_DIR / "export"

# --- the agreement check -------------------------------------------------------------------


def _split_null(s: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """(may it be null?, the schema of its non-null values; None when it can only be null)."""
    if "oneOf" in s:
        rest = [b for b in s["oneOf"] if b.get("type") != "null"]
        assert len(rest) <= 1, f"oneOf of several non-null shapes: {s}"
        return len(rest) < len(s["oneOf"]), (rest[0] if rest else None)
    if "enum" in s:
        values = [v for v in s["enum"] if v is not None]
        return len(values) < len(s["enum"]), {"enum": values}
    t = s.get("type")
    if isinstance(t, list):
        rest_types = [x for x in t if x != "null"]
        assert len(rest_types) == 1, f"several non-null types: {s}"
        return len(rest_types) < len(t), {**s, "type": rest_types[0]}
    if t == "null":
        return True, None
    return False, s


SCALARS = {"string": str, "integer": int, "boolean": bool, "number": float}


def _union_args(hint: Any) -> tuple[Any, ...]:
    """The members of a union (`X | None` or typing.Union), or the hint alone."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return typing.get_args(hint)
    return (hint,)


def _check_value(hint: Any, s: dict[str, Any], where: str, problems: list[str]) -> None:
    nullable, rest = _split_null(s)
    args = set(_union_args(hint))
    has_none = type(None) in args
    args.discard(type(None))
    if has_none != nullable:
        problems.append(f"{where}: the schema says nullable={nullable}, the type is {hint}")
    if rest is None:
        if args:
            problems.append(f"{where}: the schema allows only null, the type is {hint}")
        return
    if len(args) != 1:
        problems.append(f"{where}: the type {hint} is not one kind of value")
        return
    (h,) = args
    if "const" in rest or "enum" in rest:
        values = [rest["const"]] if "const" in rest else rest["enum"]
        if any(isinstance(v, float) for v in values):
            ok = h is float  # float values cannot be a typing.Literal
        else:
            ok = typing.get_origin(h) is Literal and set(typing.get_args(h)) == set(values)
        if not ok:
            problems.append(f"{where}: the schema's values {values}, the type {h}")
    elif rest.get("type") in SCALARS:
        if h is not SCALARS[rest["type"]]:
            problems.append(f"{where}: the schema's type {rest['type']}, the type {h}")
    elif rest.get("type") == "array":
        if typing.get_origin(h) is not tuple or typing.get_args(h)[1:] != (...,):
            problems.append(f"{where}: an array in the schema, the type {h}")
        else:
            _check_value(typing.get_args(h)[0], rest["items"], f"{where}[]", problems)
    elif rest.get("type") == "object" and rest.get("additionalProperties") is False:
        if not (isinstance(h, type) and issubclass(h, Record)):
            problems.append(f"{where}: a closed object in the schema, the type {h}")
        else:
            problems += disagreements(h, rest, where)
    elif h != JsonObject:  # an open object, or a value the schema does not type
        problems.append(f"{where}: an open object in the schema, the type {h} (not JsonObject)")


def disagreements(cls: type, s: dict[str, Any], where: str = "") -> list[str]:
    """Every way the record class and its object schema disagree, as readable lines."""
    where = where or cls.__name__
    fields = {f.name: f for f in dataclasses.fields(cls)}
    props = s.get("properties", {})
    problems = [f"{where}.{k}: in the schema only" for k in props if k not in fields]
    problems += [f"{where}.{k}: in the type only" for k in fields if k not in props]
    common_props = [k for k in props if k in fields]
    if common_props != [k for k in fields if k in props]:
        problems.append(f"{where}: field order {list(fields)} is not the schema's {list(props)}")
    if s.get("additionalProperties") is not False:
        problems.append(f"{where}: a record class for an open object")
    hints = typing.get_type_hints(cls)
    required = set(s.get("required", []))
    for name in common_props:
        f, hint = fields[name], hints[name]
        args = _union_args(hint)
        absent = Literal[Absent.ABSENT] in args
        if name in required and (f.default is not dataclasses.MISSING or absent):
            problems.append(f"{where}.{name}: required in the schema, may be absent in the type")
        if name not in required and (f.default is not ABSENT or not absent):
            problems.append(
                f"{where}.{name}: not required in the schema, the type must default to ABSENT"
            )
        rest = tuple(a for a in args if a != Literal[Absent.ABSENT])
        value_hint = typing.Union[rest] if absent else hint  # noqa: UP007
        _check_value(value_hint, props[name], f"{where}.{name}", problems)
    return problems


@pytest.mark.parametrize("name", list(PAIRS))
def test_types_and_schemas_agree(name: str):
    assert disagreements(PAIRS[name], schema(name)) == []


def test_a_property_in_the_schema_only_is_caught():
    s = copy.deepcopy(schema("log"))
    s["properties"]["new_field"] = {"type": "string"}
    s["required"].append("new_field")
    assert disagreements(LogLine, s) == ["LogLine.new_field: in the schema only"]
    s = copy.deepcopy(schema("trajectory"))
    s["properties"]["turns"]["items"]["properties"]["new_field"] = {"type": "integer"}
    assert disagreements(Trajectory, s) == ["Trajectory.turns[].new_field: in the schema only"]


def test_a_field_in_the_type_only_is_caught():
    extended = dataclasses.make_dataclass(
        "LogLinePlus", [("new_field", str)], bases=(LogLine,), frozen=True, kw_only=True
    )
    assert disagreements(extended, schema("log")) == ["LogLinePlus.new_field: in the type only"]


def test_required_nullable_and_enum_mismatches_are_caught():
    s = copy.deepcopy(schema("log"))
    s["required"].append("response_model")  # required, but the type may be absent
    s["properties"]["think"] = {"type": "string"}  # not nullable, but the type has None
    s["properties"]["level"] = {"enum": ["L1", "L2", "L3"]}
    s["properties"]["earlier_asks"]["items"]["required"].remove("content")
    assert disagreements(LogLine, s) == [
        "LogLine.level: the schema's values ['L1', 'L2', 'L3'],"
        " the type typing.Literal['L1', 'L2']",
        "LogLine.response_model: required in the schema, may be absent in the type",
        "LogLine.earlier_asks[].content: not required in the schema,"
        " the type must default to ABSENT",
        "LogLine.think: the schema says nullable=False, the type is str | None",
    ]


# --- records generated from the schema round-trip -----------------------------------------

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
json_values = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=4,
)


def from_schema(s: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against the schema subset log and trajectory use (a JSON Schema data
    generator: hypothesis-jsonschema no longer works with current hypothesis)."""
    if "const" in s:
        return st.just(s["const"])
    if "enum" in s:
        return st.sampled_from(s["enum"])
    if "oneOf" in s:
        return st.one_of([from_schema(b) for b in s["oneOf"]])
    t = s.get("type")
    if isinstance(t, list):
        return st.one_of([from_schema({**s, "type": x}) for x in t])
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "integer":
        return st.integers(min_value=s.get("minimum"), max_value=s.get("minimum", 0) + 1000)
    if t == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if t == "string":
        if "pattern" in s:
            return st.from_regex(s["pattern"], fullmatch=True)
        return st.text(max_size=8)
    if t == "array":
        return st.lists(from_schema(s["items"]), min_size=s.get("minItems", 0), max_size=3)
    if t == "object":
        return _objects(s)
    return json_values  # a property the schema leaves untyped


def _objects(s: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props, required = s.get("properties", {}), s.get("required", [])
    order = [*props, *(r for r in required if r not in props)]
    known = st.fixed_dictionaries(
        {k: from_schema(props.get(k, {})) for k in order if k in required},
        optional={k: from_schema(props[k]) for k in order if k not in required},
    ).map(lambda d: {k: d[k] for k in order if k in d})  # in the schema's (writers') order
    if s.get("additionalProperties") is not False:  # an open object keeps any other key
        extra = st.dictionaries(
            st.text(min_size=1, max_size=6).filter(lambda k: k not in props),
            json_values,
            max_size=2,
        )
        return st.tuples(known, extra).map(lambda pair: pair[0] | pair[1])
    return known


def assert_round_trip(cls: type[Record], record: dict[str, Any]) -> None:
    typed = cls.from_dict(record)
    assert dumps(typed.to_dict()) == dumps(record)  # same keys, order and values
    assert typed.to_dict() == record
    assert cls.from_dict(typed.to_dict()) == typed


@pytest.mark.parametrize("name", list(PAIRS))
def test_generated_records_round_trip(name: str):
    @settings(
        max_examples=60,  # ~3 s a schema; generation, not the round trip, is the cost
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(from_schema(schema(name)))
    def check(record: dict[str, Any]) -> None:
        validate(record, name)  # the generator makes only schema-valid records
        assert_round_trip(PAIRS[name], record)

    check()


# --- records the writers wrote round-trip byte for byte -----------------------------------


def test_the_export_fixture_log_round_trips():
    lines = (EXPORT_FIXTURE / "log.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) > 20
    for i, line in enumerate(lines, start=1):
        record = json.loads(line)
        validate(record, "log", line=i)
        assert dumps(LogLine.from_dict(record).to_dict()) == line, f"line {i}"
    # the fixture predates response_model: its lines have no such key, and keep none
    assert LogLine.from_dict(json.loads(lines[0])).response_model is ABSENT


def shard_records(line: dict[str, Any]) -> tuple[dict, list[dict], list[dict]]:
    """The prompt, response and gate records `grumem log` joins back into `line`; an
    unparsed turn is recorded as asked twice, so the join writes an earlier ask."""
    key = {k: line[k] for k in ("trajectory_id", "t")}
    prompt = {
        **{k: line[k] for k in ("trajectory_id", "project", "query_id", "session", "sample")},
        **{"t": line["t"], "chunk_sha": line["chunk_sha"], "chunk_file": "c.jsonl"},
        **{"chunk_line": line["t"], "system": None, "prefix": "", "suffix": ""},
        "tokens": {"question": 1, "section": 1, "fixed": 1},
    }
    if line["status"] == "aborted":
        abort = {"kind": "abort", **key, "chunk_sha": line["chunk_sha"], **line["abort"]}
        return prompt, [abort], []
    responses, gates = [], []
    for ask in range(1 if line["parsed"] else 2):
        responses.append(
            {
                **{"kind": "exchange", **key, "ask": ask, "chunk_sha": line["chunk_sha"]},
                **{k: line[k] for k in ("memory_before", "request", "response")},
                **{"attempts": [line["response"]], "response_model": "served-model"},
            }
        )
        gate_keys = ("parsed", "update_gate", "exit_gate", "candidate", "think", "parse_error")
        gates.append(
            {
                **{**key, "ask": ask},
                **{k: line[k] for k in (*gate_keys, "content", "finish_reason", "memory_after")},
            }
        )
    return prompt, responses, gates


def test_the_log_stage_writes_what_round_trips(tmp_path: Path):
    """`grumem log` over shards rebuilt from the fixture: its lines (with response_model,
    and an earlier ask) are LogLine's fields in order, and round-trip byte for byte."""
    prompts, responses, gates = [], [], []
    for line in (EXPORT_FIXTURE / "log.jsonl").read_text(encoding="utf-8").splitlines():
        p, r, g = shard_records(json.loads(line))
        prompts.append(p)
        responses += r
        gates += g
    for name, records in (("prompts", prompts), ("responses", responses), ("gates", gates)):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(dumps(r) + "\n" for r in records), encoding="utf-8"
        )
    out = tmp_path / "log.jsonl"
    grumem(
        "log",
        *("--config", str(FIXTURES_DIR.parent / "config.yaml"), "--out", str(out)),
        *("--prompts", str(tmp_path / "prompts.jsonl")),
        *("--responses", str(tmp_path / "responses.jsonl")),
        *("--gates", str(tmp_path / "gates.jsonl")),
    )
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(prompts)
    typed = [LogLine.from_dict(json.loads(line)) for line in lines]
    assert [dumps(t.to_dict()) for t in typed] == lines
    assert [f.name for f in dataclasses.fields(LogLine)] == list(json.loads(lines[0]))
    assert sum(len(t.earlier_asks) for t in typed) == 1
    assert {t.response_model for t in typed} == {"served-model", None}


def grumem(*args: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "grumem", *args], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr


def test_a_real_export_round_trips(tmp_path: Path):
    fx = EXPORT_FIXTURE
    kappa = tmp_path / "kappa.json"
    grumem(
        "kappa",
        *("--labels", str(fx / "labels.jsonl"), "--calibration", str(fx / "calibration.jsonl")),
        *("--queries", str(fx / "queries.yaml"), "--chunks", str(fx / "chunks.jsonl")),
        *("--settings", '{"export": {"min_calibration": 10}}', "--out", str(kappa)),
    )
    out = tmp_path / "corpus"
    grumem(
        "export",
        *("--turn-log", str(fx / "log.jsonl"), "--labels", str(fx / "labels.jsonl")),
        *("--kappa", str(kappa), "--out-dir", str(out)),
    )
    lines = (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5  # fixtures/export/README.md's hand count
    typed = [Trajectory.from_dict(json.loads(line)) for line in lines]
    assert [dumps(t.to_dict()) for t in typed] == lines
    assert any(t.aborted is not None for t in typed)


# --- shape errors and immutability --------------------------------------------------------


def a_trajectory() -> dict[str, Any]:
    turn = {
        "t": 1,
        "prompt": [{"role": "user", "content": "p"}],
        "response": "r",
        "r_update": 1,
        "parsed": False,
        "chunk_sha": "0" * 64,
        "label": True,
        "update_gate": None,
        "exit_gate": None,
        "attempt": 1,
        "asks": 2,
        "earlier_asks": [
            {"ask": 0, "request_sha256": "s", "response": None, "parsed": False, "parse_error": {}}
        ],
        "request_sha256": "s",
        "response_model": None,
        "advantage": None,
        "advantage_traj": 0.5,
        "advantage_turn": None,
    }
    return {
        "trajectory_id": "p/q/s/0",
        "turns": [turn],
        "r_exit": None,
        "r_exit_reason": "no_exit_gate",
        "r_format": 0,
        "r_outcome": None,
        "t_exit": None,
        "t_last_evidence": 1,
        "project": "p",
        "query_id": "q",
        "session": "s",
        "sample": 0,
        "level": "L1",
        "model": "m",
        "aborted": {"t": 2, "reason": "budget", "component": "memory"},
    }


def test_shape_errors_name_the_json_path():
    record = a_trajectory()
    validate(record, "trajectory")
    assert_round_trip(Trajectory, record)
    record["turns"][0]["earlier_asks"][0]["surprise"] = 1
    with pytest.raises(RecordShapeError) as info:
        Trajectory.from_dict(record)
    assert str(info.value) == "turns.0.earlier_asks.0.surprise: unknown field of TurnEarlierAsk"
    record = a_trajectory()
    del record["aborted"]["component"]
    with pytest.raises(RecordShapeError, match=r"^aborted\.component: missing field of Aborted$"):
        Trajectory.from_dict(record)
    record = a_trajectory()
    record["turns"] = {"t": 1}
    with pytest.raises(RecordShapeError, match=r"^turns: expected an array, got dict$"):
        Trajectory.from_dict(record)


def test_records_are_frozen():
    typed = Trajectory.from_dict(a_trajectory())
    with pytest.raises(dataclasses.FrozenInstanceError):
        typed.r_format = 1  # type: ignore[misc]
    assert isinstance(typed.turns, tuple) and isinstance(typed.turns[0].prompt, tuple)
    assert typed.turns[0].prompt[0].content == "p"
