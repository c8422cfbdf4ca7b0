"""grumem.records against the JSON Schemas they mirror, one class per record schema.

The schemas stay the contract. `disagreements` walks a record class (through
msgspec.inspect) and its schema side by side: every property is a field and every
field a property, in the schema's order (the writers' key order); required-ness is
no-default-ness; nullability is None in the type; enums and consts are Literals;
minimum, maximum, minLength, minItems and pattern are the type's constraints;
`number` is int | float; closed objects are classes refusing unknown fields, open
ones classes reading past them. Records generated from each schema, and the files
real `grumem` and `snakemake` runs write, round-trip to the same bytes."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

from grumem.core.json_text import dumps
from grumem.errors import RecordShapeError
from grumem.io.jsonl import schema, validate
from grumem.io.paths import SCHEMAS_DIR
from grumem.records import SCHEMAS, schema_name
from grumem.records.base import Record, decoder, or_none
from grumem.records.log import LogLine
from grumem.records.rollout_row import RolloutRow
from grumem.records.trajectory import Trajectory
from support.checkout import FIXTURES_DIR
from support.schema_data import from_schema
from support.workflow import FAKE_DEMO, demo_project, snakemake, write_config

EXPORT_FIXTURE = FIXTURES_DIR / "export"
REPO = FIXTURES_DIR.parent

# what a Struct cannot type, checked in __post_init__ instead (and by the mutation tests)
KNOWN = {
    "Trajectory.r_exit: the schema allows -0.5 | -0.75 | 0 | None, the type int | float | None"
}

# --- the agreement check -------------------------------------------------------------------

Kinds = frozenset[tuple[Any, ...]]


def _resolve(s: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in s:
        node: Any = root
        for part in s["$ref"][2:].split("/"):
            node = node[part]
        s = {**node, **{k: v for k, v in s.items() if k != "$ref"}}
    return s


def _pattern(p: str | None) -> str | None:
    # the compiled check every reader runs takes `$` as the end of the string
    return None if p is None else p[:-1] + "\\Z" if p.endswith("$") else p


def schema_kinds(s: dict[str, Any], root: dict[str, Any], where: str) -> Kinds:
    """The values a schema allows, as kinds of JSON value with their constraints."""
    s = _resolve(s, root)
    for key in ("oneOf", "anyOf"):
        if key in s:
            rest = {k: v for k, v in s.items() if k not in (key, "type", "required")}
            out: set[tuple[Any, ...]] = set()
            for b in s[key]:
                out |= schema_kinds({**rest, **_resolve(b, root)}, root, where)
            return frozenset(out)
    if "const" in s:
        return frozenset({("literal", s["const"])})
    if "enum" in s:
        return frozenset(("null",) if v is None else ("literal", v) for v in s["enum"])
    t = s.get("type", "object" if "properties" in s else None)
    kinds: set[tuple[Any, ...]] = set()
    bounds = (s.get("exclusiveMinimum"), s.get("minimum"), s.get("exclusiveMaximum"))
    bounds += (s.get("maximum"),)
    for x in t if isinstance(t, list) else [t]:
        if x == "null":
            kinds.add(("null",))
        elif x == "boolean":
            kinds.add(("bool",))
        elif x in ("integer", "number"):
            kinds.add(("int", *bounds))
            if x == "number":
                kinds.add(("float", *bounds))
        elif x == "string":
            kinds.add(("str", s.get("minLength"), _pattern(s.get("pattern"))))
        elif x == "array":
            items = schema_kinds(s["items"], root, f"{where}[]")
            kinds.add(("array", s.get("minItems"), items))
        elif x == "object":
            kinds.add(_object_kind(s, root, where))
        elif x is None:
            kinds.add(("any",))
    return frozenset(kinds)


def _object_kind(s: dict[str, Any], root: dict[str, Any], where: str) -> tuple[Any, ...]:
    props = s.get("properties")
    extra = s.get("additionalProperties", True)
    if not props and isinstance(extra, dict):
        names = {"type": "string", **s.get("propertyNames", {})}
        return ("dict", schema_kinds(names, root, where), schema_kinds(extra, root, where))
    if not props:
        return ("any object",)
    required = set(s.get("required", []))
    fields = tuple(
        (k, k in required, schema_kinds(v, root, f"{where}.{k}")) for k, v in props.items()
    )
    return ("object", extra is False, fields)


def type_kinds(t: mi.Type) -> Kinds:
    """The values a msgspec type allows, in the same terms."""
    if isinstance(t, mi.UnionType):
        return frozenset().union(*(type_kinds(x) for x in t.types))
    if isinstance(t, mi.NoneType):
        return frozenset({("null",)})
    if isinstance(t, mi.BoolType):
        return frozenset({("bool",)})
    if isinstance(t, (mi.IntType, mi.FloatType)):
        kind = "int" if isinstance(t, mi.IntType) else "float"
        return frozenset({(kind, t.gt, t.ge, t.lt, t.le)})
    if isinstance(t, mi.StrType):
        return frozenset({("str", t.min_length, t.pattern)})
    if isinstance(t, mi.LiteralType):
        return frozenset(("literal", v) for v in t.values)
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        return frozenset({("array", t.min_length, type_kinds(t.item_type))})
    if isinstance(t, mi.DictType):
        if isinstance(t.value_type, mi.AnyType) and t.key_type == mi.StrType():
            return frozenset({("any object",)})
        return frozenset({("dict", type_kinds(t.key_type), type_kinds(t.value_type))})
    if isinstance(t, mi.StructType):
        fields = tuple((f.encode_name, f.required, type_kinds(f.type)) for f in t.fields)
        if t.tag_field is not None:
            fields = ((t.tag_field, True, frozenset({("literal", t.tag)})), *fields)
        return frozenset({("object", t.forbid_unknown_fields, fields, t.cls.__name__)})
    if isinstance(t, mi.AnyType):
        return frozenset({("any",)})
    raise AssertionError(f"no kind for {t}")


def _shown(kinds: Kinds | set[tuple[Any, ...]]) -> str:
    """Scalar kinds as a type reads: `int >=1 | None`, `'L1' | 'L2'`."""

    def one(k: tuple[Any, ...]) -> str:
        if k[0] == "literal":
            return repr(k[1])
        if k[0] in ("int", "float"):
            ops = zip((">", ">=", "<", "<="), k[1:], strict=True)
            return " ".join([k[0], *(f"{op}{v}" for op, v in ops if v is not None)])
        if k[0] == "str":
            extra = [f"minLength {k[1]}"] if k[1] is not None else []
            extra += [f"pattern {k[2]}"] if k[2] is not None else []
            return " ".join(["str", *extra])
        return {"null": "None"}.get(k[0], k[0])

    order = {"literal": 0, "bool": 1, "int": 2, "float": 3, "str": 4, "any": 5, "null": 9}
    return " | ".join(one(k) for k in sorted(kinds, key=lambda k: (order.get(k[0], 6), repr(k))))


def _compare(sk: Kinds, tk: Kinds, where: str, problems: list[str]) -> None:
    """Every way two sets of kinds disagree; objects compared field by field."""
    s_rest = {k for k in sk if k[0] != "object"}
    t_rest = {k for k in tk if k[0] != "object"}
    # arrays and dicts nest: their insides are compared, for a line naming the field
    for kind in ("array", "dict"):
        sa = [k for k in s_rest if k[0] == kind]
        ta = [k for k in t_rest if k[0] == kind]
        if len(sa) == len(ta) == 1:
            if kind == "array":
                if sa[0][1] != ta[0][1]:
                    problems.append(
                        f"{where}: minItems {sa[0][1]} in the schema, {ta[0][1]} in the type"
                    )
                _compare(sa[0][2], ta[0][2], f"{where}[]", problems)
            else:
                _compare(sa[0][1], ta[0][1], f"{where}{{keys}}", problems)
                _compare(sa[0][2], ta[0][2], f"{where}{{}}", problems)
            s_rest -= set(sa)
            t_rest -= set(ta)
    if s_rest != t_rest:
        problems.append(f"{where}: the schema allows {_shown(s_rest)}, the type {_shown(t_rest)}")
    s_objects = sorted((k for k in sk if k[0] == "object"), key=_tag)
    t_objects = sorted((k for k in tk if k[0] == "object"), key=_tag)
    if len(s_objects) != len(t_objects):
        problems.append(
            f"{where}: {len(s_objects)} object shapes in the schema, {len(t_objects)} in the type"
        )
        return
    for so, to in zip(s_objects, t_objects, strict=True):
        problems += _object_disagreements(so, to, where or to[3])


def _tag(o: tuple[Any, ...]) -> str:
    """The `kind` a shape of a tagged union has (a response record's), "" for others."""
    return next((repr(sorted(kinds)) for name, _, kinds in o[2] if name == "kind"), "")


def _object_disagreements(so: tuple[Any, ...], to: tuple[Any, ...], where: str) -> list[str]:
    problems = []
    s_fields = {name: (req, kinds) for name, req, kinds in so[2]}
    t_fields = {name: (req, kinds) for name, req, kinds in to[2]}
    problems += [f"{where}.{k}: in the schema only" for k in s_fields if k not in t_fields]
    problems += [f"{where}.{k}: in the type only" for k in t_fields if k not in s_fields]
    common = [k for k in s_fields if k in t_fields]
    if common != [k for k in t_fields if k in s_fields]:
        problems.append(
            f"{where}: field order {list(t_fields)} is not the schema's {list(s_fields)}"
        )
    if so[1] != to[1]:
        shapes = ("an open", "open") if to[1] else ("a closed", "closed")
        problems.append(f"{where}: {shapes[0]} object in the schema, the type is not {shapes[1]}")
    for name in common:
        (s_req, s_kinds), (t_req, t_kinds) = s_fields[name], t_fields[name]
        if s_req and not t_req:
            problems.append(f"{where}.{name}: required in the schema, may be absent in the type")
        if t_req and not s_req:
            problems.append(
                f"{where}.{name}: not required in the schema, the type must default to ABSENT"
            )
        _compare(s_kinds, t_kinds, f"{where}.{name}", problems)
    return problems


def disagreements(kind: Any, s: dict[str, Any]) -> list[str]:
    """Every way a record type and its schema disagree, as readable lines."""
    problems: list[str] = []
    _compare(schema_kinds(s, s, ""), type_kinds(mi.type_info(kind)), "", problems)
    return sorted(problems)


def test_every_record_schema_has_its_class():
    names = {p.name.removesuffix(".schema.yaml") for p in SCHEMAS_DIR.glob("*.schema.yaml")}
    # config and queries are settings a person writes, loaded by grumem.config
    assert set(SCHEMAS) == names - {"config", "queries"}
    assert all(schema_name(kind) == name for name, kind in SCHEMAS.items())


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_types_and_schemas_agree(name: str):
    found = set(disagreements(SCHEMAS[name], schema(name)))
    assert found - KNOWN == set()


def test_the_known_disagreement_is_still_there():
    assert set(disagreements(Trajectory, schema("trajectory"))) == KNOWN


def test_a_property_in_the_schema_only_is_caught():
    s = copy.deepcopy(schema("log"))
    s["properties"]["new_field"] = {"type": "string"}
    s["required"].append("new_field")
    assert disagreements(LogLine, s) == ["LogLine.new_field: in the schema only"]
    s = copy.deepcopy(schema("trajectory"))
    s["properties"]["turns"]["items"]["properties"]["new_field"] = {"type": "integer"}
    found = set(disagreements(Trajectory, s)) - KNOWN
    assert found == {"Trajectory.turns[].new_field: in the schema only"}


def test_a_field_in_the_type_only_is_caught():
    extended = msgspec.defstruct(
        "LogLinePlus", [("new_field", str)], bases=(LogLine,), kw_only=True
    )
    assert disagreements(extended, schema("log")) == ["LogLinePlus.new_field: in the type only"]


def test_required_nullable_enum_open_and_constraint_mismatches_are_caught():
    s = copy.deepcopy(schema("log"))
    s["required"].append("response_model")  # required, but the type may be absent
    s["properties"]["think"] = {"type": "string"}  # not nullable, but the type has None
    s["properties"]["level"] = {"enum": ["L1", "L2", "L3"]}
    s["properties"]["t"]["minimum"] = 0
    s["properties"]["chunk_sha"]["pattern"] = "^[0-9a-f]{40}$"
    s["$defs"]["request"]["additionalProperties"] = True  # open, but the type is closed
    s["properties"]["earlier_asks"]["items"]["required"].remove("content")
    s["properties"]["earlier_asks"]["minItems"] = 1
    assert disagreements(LogLine, s) == [
        "LogLine.chunk_sha: the schema allows str pattern ^[0-9a-f]{40}\\Z,"
        " the type str pattern ^[0-9a-f]{64}\\Z",
        "LogLine.earlier_asks: minItems 1 in the schema, None in the type",
        "LogLine.earlier_asks[].content: not required in the schema,"
        " the type must default to ABSENT",
        "LogLine.earlier_asks[].request: an open object in the schema, the type is not open",
        "LogLine.level: the schema allows 'L1' | 'L2' | 'L3', the type 'L1' | 'L2'",
        "LogLine.request: an open object in the schema, the type is not open",
        "LogLine.response_model: required in the schema, may be absent in the type",
        "LogLine.t: the schema allows int >=0, the type int >=1",
        "LogLine.think: the schema allows str, the type str | None",
    ]


# --- records generated from each schema round-trip, and its mutants agree both ways --------


def assert_round_trip(kind: Any, record: dict[str, Any]) -> Record:
    """The record decoded from the bytes the writers write encodes back to them."""
    line = dumps(record)
    typed = decoder(kind).decode(line.encode())
    assert typed.encode() == line.encode()  # same keys, order and values, floats included
    assert typed.to_dict() == record
    assert msgspec.convert(record, kind, strict=True) == typed
    return typed


GENERATED = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_generated_records_round_trip(name: str):
    @GENERATED
    @given(from_schema(schema(name), extras=False))
    def check(record: dict[str, Any]) -> None:
        validate(record, name)  # the generator makes only schema-valid records
        assert_round_trip(SCHEMAS[name], record)

    check()


def class_accepts(kind: Any, record: Any) -> bool:
    """Whether the record class takes the value, from the bytes and from the dict alike."""
    try:
        msgspec.convert(record, kind, strict=True)
        from_dict = True
    except msgspec.ValidationError:
        from_dict = False
    try:
        decoder(kind).decode(dumps(record).encode())
        from_bytes = True
    except msgspec.ValidationError:
        from_bytes = False
    assert from_dict == from_bytes, record
    return from_dict


def _as_integer(record: Any, path: tuple[Any, ...], value: Any) -> Any:
    from support.schema_data import mutated

    return mutated(record, path, int(value))


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_mutants_are_accepted_by_the_class_exactly_when_the_schema_accepts_them(name: str):
    """Every field of generated records (nested ones too, the first of those one
    subschema checks) set to each JSON type, deleted, or given an unknown sibling: the
    class accepts what the schema accepts, and only that. The one way the class is
    stricter: a float where an integer enum or integer is (`r_format: 1.0`), which no
    writer writes."""
    from support.schema_data import VALUES, mutated, schema_accepts, schema_places

    kind = SCHEMAS[name]
    seen = {"accepted": 0, "refused": 0, "stricter": 0}

    @settings(GENERATED, max_examples=4)
    @given(from_schema(schema(name), extras=False))
    def check(record: dict[str, Any]) -> None:
        for path in schema_places(record, schema(name)):
            cases = [(v, mutated(record, path, v)) for v in VALUES]
            cases.append((None, mutated(record, path, None, delete=True)))
            if len(path) == 1 or isinstance(path[-1], str):
                cases.append((1, mutated(record, (*path[:-1], "extra_field"), 1)))
            for value, m in cases:
                by_schema, by_class = schema_accepts(m, name), class_accepts(kind, m)
                if by_schema and not by_class:
                    assert isinstance(value, float) and value.is_integer(), (path, m)
                    assert class_accepts(kind, _as_integer(record, path, value)), (path, m)
                    seen["stricter"] += 1
                    continue
                assert by_schema == by_class, (path, value, m)
                seen["accepted" if by_class else "refused"] += 1

    check()
    assert seen["accepted"] and seen["refused"]  # both branches met


def test_shape_errors_name_the_field():
    record = copy.deepcopy(json.loads((EXPORT_FIXTURE / "log.jsonl").read_text().splitlines()[1]))
    record["request"]["surprise"] = 1
    with pytest.raises(RecordShapeError) as info:
        LogLine.convert(record)
    assert (info.value.field, info.value.why) == (
        "request.surprise",
        "object contains unknown field `surprise`",
    )
    del record["request"]["surprise"]
    del record["response"]["latency_s"]
    with pytest.raises(RecordShapeError, match=r"^response\.latency_s: object missing required"):
        LogLine.decode(dumps(record))
    record["response"]["latency_s"] = 0.5
    record["earlier_asks"] = {"ask": 0}
    with pytest.raises(RecordShapeError, match=r"^earlier_asks: expected `array`, got `object`$"):
        LogLine.convert(record)


def test_records_are_frozen_values():
    line = LogLine.decode((EXPORT_FIXTURE / "log.jsonl").read_bytes().splitlines()[1])
    with pytest.raises(AttributeError):
        line.t = 2  # type: ignore[misc]
    assert isinstance(line.earlier_asks, list)
    assert or_none(line.response_model) is None  # absent from this log: read as None
    with pytest.raises(TypeError):  # a field is an attribute: no record reads like a dict
        line["t"]  # noqa: B018 (reading it is the test)
    assert line == LogLine.decode(line.encode())


# --- what the writers wrote round-trips byte for byte -------------------------------------


def test_the_export_fixture_log_round_trips():
    lines = (EXPORT_FIXTURE / "log.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) > 20
    for i, line in enumerate(lines, start=1):
        record = json.loads(line)
        validate(record, "log", line=i)
        assert LogLine.decode(line).encode() == line.encode(), f"line {i}"
    # the fixture predates response_model: its lines have no such key, and keep none
    assert LogLine.decode(lines[0]).response_model is msgspec.UNSET


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
        gate_keys = ("parsed", "update_gate", "exit_gate", "candidate", "think")
        gates.append(
            {
                **{**key, "ask": ask},
                **{k: line[k] for k in (*gate_keys, "content", "finish_reason", "parse_error")},
                "memory_after": line["memory_after"],
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
        *("--config", str(REPO / "config.yaml"), "--out", str(out)),
        *("--prompts", str(tmp_path / "prompts.jsonl")),
        *("--responses", str(tmp_path / "responses.jsonl")),
        *("--gates", str(tmp_path / "gates.jsonl")),
    )
    lines = out.read_bytes().splitlines()
    assert len(lines) == len(prompts)
    typed = [LogLine.decode(line) for line in lines]
    assert [t.encode() for t in typed] == lines
    assert list(LogLine.__struct_fields__) == list(json.loads(lines[0]))
    assert sum(len(t.earlier_asks) for t in typed) == 1
    assert {t.response_model for t in typed} == {"served-model", None}


def grumem(*args: str, cwd: Path | None = None) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "grumem", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
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
    lines = (out / "trajectories.jsonl").read_bytes().splitlines()
    assert len(lines) == 5  # fixtures/export/README.md's hand count
    typed = [Trajectory.decode(line) for line in lines]
    assert [t.encode() for t in typed] == lines
    assert any(t.aborted is not None for t in typed)


# which record each file of a run is (a path relative to results/)
RUN_FILES = [
    ("*/chunks/**/*.jsonl", "chunk"),
    ("*/chunked/*.json", "chunk-manifest"),
    ("*/sessions.jsonl", "session-index"),
    ("*/prompts/*.jsonl", "prompt"),
    ("*/responses/*.jsonl", "response"),
    ("*/gates/*.jsonl", "gate"),
    ("*/log.jsonl", "log"),
    ("*/labels.jsonl", "label"),
    ("*/unjudged.jsonl", "unjudged"),
    ("*/kappa.json", "kappa"),
    ("*/corpus/trajectories.jsonl", "trajectory"),
    ("*/corpus/summary.json", "summary"),
    ("sample.jsonl", "calibration-sample"),
]


@pytest.mark.slow
def test_every_file_a_run_writes_round_trips(tmp_path: Path, fake_server) -> None:
    """A run of the workflow (a judge-labelled project to its corpus, a transcripts
    project to its log) and `grumem calibrate-sample`: every record of every file, read
    as its class, encodes back to the file's bytes (JSON Lines compact, the documents
    pretty as grumem.io.jsonl.write_json writes them)."""
    server = fake_server(FAKE_DEMO)
    transcripts = demo_project(
        transcripts={"glob": str(REPO / "fixtures/transcripts/claude-code/*.jsonl")}
    )
    del transcripts["chunks"]
    demo = demo_project(labels={"source": "judge"})
    write_config(tmp_path, server.base_url, projects={"demo": demo, "cc": transcripts})
    snakemake(tmp_path, "results/demo/corpus/summary.json", "results/cc/log.jsonl")
    results = tmp_path / "results"
    grumem(
        "calibrate-sample",
        *("--queries", str(REPO / "fixtures/demo/queries.yaml")),
        *("--labels", str(results / "demo/labels.jsonl"), "--n", "6", "--seed", "1"),
        *("--out", str(results / "sample.jsonl"), str(REPO / "fixtures/demo/chunks")),
    )
    counts = dict.fromkeys(SCHEMAS, 0)
    for pattern, name in RUN_FILES:
        kind = SCHEMAS[name]
        for path in sorted(p for p in results.glob(pattern) if p.is_file()):
            data = path.read_bytes()
            if path.suffix == ".json":
                typed = decoder(kind).decode(data)
                text = json.dumps(typed.to_dict(), ensure_ascii=False, indent=2) + "\n"
                assert text.encode() == data, path
                counts[name] += 1
                continue
            for i, line in enumerate(data.splitlines(), start=1):
                assert decoder(kind).decode(line).encode() == line, f"{path}:{i}"
                counts[name] += 1
    for path in sorted(results.glob("*/corpus/sessions.parquet")):
        for row in pq.read_table(path).to_pylist():
            assert RolloutRow.convert(row).to_dict() == row, path
            counts["rollout-row"] += 1
    # every kind met, but the judge's failures (it labelled every pair) and compare.json,
    # which `snakemake evaluate` writes (tests/stages/test_stage_evaluate_compare.py
    # holds its bytes to a golden file)
    assert [n for n, c in counts.items() if c == 0] == ["compare", "unjudged"]
    assert (results / "demo/unjudged.jsonl").read_bytes() == b""
