"""grumem.io.jsonl: schema validation is strict about integers, and text that is not valid
Unicode (a lone UTF-16 surrogate) is an error naming file, line and field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.config.settings import load_config, validate_config
from grumem.core.json_text import sha256_text
from grumem.errors import GrumemError, RecordError
from grumem.io.chunk_files import read_chunk_file
from grumem.io.jsonl import (
    compile_fast,
    read_jsonl,
    read_jsonl_fast,
    schema,
    strict_validator_class,
    validate,
    write_jsonl,
)
from grumem.io.paths import SCHEMAS_DIR
from support.checkout import FIXTURES_DIR

EXPORT = FIXTURES_DIR / "export"
SCHEMAS = sorted(p.name.removesuffix(".schema.yaml") for p in SCHEMAS_DIR.glob("*.schema.yaml"))


# ------------------------------------------------------------------ integers are integers


def integer_nodes(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, subschema) of every subschema whose type admits integer."""
    if isinstance(node, dict):
        types = node.get("type")
        if types == "integer" or (isinstance(types, list) and "integer" in types):
            yield where or "/", node
        for k, v in node.items():
            yield from integer_nodes(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from integer_nodes(v, f"{where}/{i}")


def integer_cases() -> list[tuple[str, str, dict[str, Any]]]:
    cases = []
    for name in SCHEMAS:
        for where, node in integer_nodes(schema(name)):
            cases.append((name, where, node))
    return cases


CASES = integer_cases()


def test_the_schemas_have_integers_to_check() -> None:
    # chunk index, prompt/response/gate/log t and ask, kappa counts, config sizes, ...
    names = {name for name, _, _ in CASES}
    assert {"chunk", "config", "gate", "kappa", "log", "prompt", "response"} <= names
    assert len(CASES) >= 40


def allowed_integer(node: dict[str, Any], reference: Any) -> int:
    """An integer the node accepts, whatever its bounds or enum."""
    near = [node.get(k) for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")]
    near += [node.get("const"), *node.get("enum", []), 0]
    tries = [x + d for x in near if type(x) is int for d in (0, 1, -1)]
    return next(x for x in tries if reference.is_valid(x))


@pytest.mark.parametrize(("name", "where", "node"), CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_every_integer_of_every_schema_rejects_a_float(name, where, node) -> None:
    """Both validators (jsonschema, the reference; fastjsonschema, the fast path) reject
    2.0 where the schema says integer, and still accept the integer itself."""
    root = schema(name)
    sub = {"$schema": root["$schema"], **({"$defs": root["$defs"]} if "$defs" in root else {})}
    sub.update(node)
    reference = strict_validator_class(sub)(sub)
    fast = compile_fast(sub)
    good = allowed_integer(node, reference)
    fast(good)
    assert not reference.is_valid(float(good))
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        fast(float(good))


def chunk_lines() -> list[dict[str, Any]]:
    return [json.loads(x) for x in (EXPORT / "chunks.jsonl").read_text().splitlines()]


def test_chunk_index_two_point_zero_names_line_and_field(tmp_path: Path) -> None:
    lines = chunk_lines()[:3]
    lines[2]["index"] = 2.0
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(RecordError, match=r"c\.jsonl:3: field 'index' 2\.0 is not of type"):
        read_chunk_file(path)


def test_log_t_float_is_rejected_by_the_fast_reader(tmp_path: Path) -> None:
    lines = (EXPORT / "log.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["t"] = float(rec["t"])
    path = tmp_path / "log.jsonl"
    path.write_text(lines[0] + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(RecordError, match=r"log\.jsonl:2: field 't'"):
        list(read_jsonl_fast(path, "log"))


def test_a_kappa_record_with_a_float_count_is_invalid() -> None:
    record = {
        "kappa": 0.5,
        "n": 20.0,
        "observed_agreement": 0.75,
        "expected_agreement": 0.5,
        "confusion": {"yes_yes": 5, "yes_no": 5, "no_yes": 0, "no_no": 10},
        "min_calibration": 20,
        "labels_path": "l",
        "labels_sha256": "0" * 64,
        "calibration_path": "c",
        "calibration_sha256": "0" * 64,
    }
    with pytest.raises(RecordError, match="field 'n'"):
        validate(record, "kappa")


def test_config_integers_are_integers(tmp_path: Path) -> None:
    base = {"projects": {"p": {"chunks": "c/*.jsonl", "queries": "q.yaml"}}}
    with pytest.raises(RecordError, match="field 'shard_size'"):
        validate_config({**base, "shard_size": 3.0})
    with pytest.raises(RecordError, match="field 'llm.max_tokens'"):
        validate_config({**base, "llm": {"max_tokens": 64.0}})
    path = tmp_path / "config.yaml"
    path.write_text("projects: {p: {chunks: c, queries: q}}\nloop: {samples: 2.0}\n")
    with pytest.raises(RecordError, match=r"config\.yaml: field 'loop\.samples'"):
        load_config(path)
    assert validate_config({**base, "shard_size": 3})["shard_size"] == 3


# ------------------------------------------------------------------ lone surrogates


def test_lone_surrogate_in_a_chunk_file_names_line_and_field(tmp_path: Path) -> None:
    lines = [json.dumps(x) for x in chunk_lines()[:2]]
    # as JavaScript leaves it: an emoji cut between its two UTF-16 halves
    lines[1] = lines[1].replace('"text": "', '"text": "cut \\ud83d', 1)
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError) as e:
        read_chunk_file(path)
    assert (e.value.line, e.value.field) == (2, "records.0.text")
    assert "lone surrogate \\ud83d" in str(e.value)


def test_a_complete_surrogate_pair_is_text(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    rec = chunk_lines()[0]
    rec["records"][0]["text"] = "\U0001f600 ok"
    path.write_text(json.dumps(rec) + "\n")  # ensure_ascii: written as \ud83d\ude00
    assert "\\ud83d\\ude00" in path.read_text()
    assert read_chunk_file(path)[0].records[0]["text"] == "\U0001f600 ok"


def test_lone_surrogate_in_a_key_and_in_a_list(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": [1, "ok", "\\udc00"]}\n{"k\\ud800": 1}\n')
    rows = read_jsonl(path)
    with pytest.raises(RecordError, match=r"x\.jsonl:1: field 'a\.2' lone surrogate \\udc00"):
        next(rows)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.text(max_size=20), min_size=1, max_size=4),
    lone=st.one_of(st.none(), st.integers(0xD800, 0xDFFF)),
    at=st.integers(0, 100),
)
def test_lone_surrogates_are_found_whatever_the_text(tmp_path: Path, texts, lone, at) -> None:
    """json.dumps (ensure_ascii) writes astral characters as surrogate pairs, which
    are valid; an inserted lone surrogate, and only that, is an error naming it."""
    if lone is not None:
        i = at % len(texts)
        j = at % (len(texts[i]) + 1)
        texts[i] = texts[i][:j] + chr(lone) + texts[i][j:]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"texts": texts}) + "\n", encoding="ascii")
    if lone is None:
        assert next(read_jsonl(path))["texts"] == texts
    else:
        with pytest.raises(RecordError) as e:
            next(read_jsonl(path))
        assert e.value.field == f"texts.{i}" and f"\\u{lone:04x}" in e.value.why


def test_sha_and_writer_refuse_a_lone_surrogate(tmp_path: Path) -> None:
    with pytest.raises(GrumemError, match=r"lone surrogate \\ud83d at character 2"):
        sha256_text("ab\ud83d")
    out = tmp_path / "out.jsonl"
    with pytest.raises(RecordError, match=r"out\.jsonl:2: field 'text\.0'"):
        write_jsonl(out, [{"text": ["fine"]}, {"text": ["x\udfff"]}])
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left either


# ------------------------------------------------------------------ unreadable inputs


@pytest.mark.parametrize("reader", [read_jsonl, read_chunk_file])
def test_missing_file_or_directory_is_a_record_error(tmp_path: Path, reader) -> None:
    with pytest.raises(RecordError, match=r"nope\.jsonl: cannot read: No such file"):
        list(reader(tmp_path / "nope.jsonl"))
    with pytest.raises(RecordError, match="is a directory, not a file"):
        list(reader(tmp_path))


def test_schemas_read_by_libyaml_equal_the_pure_python_reading() -> None:
    """schema() reads with libyaml's CSafeLoader: the same schemas as SafeLoader."""
    import yaml

    from grumem.io.jsonl import SCHEMA_LOADER

    assert SCHEMA_LOADER is yaml.CSafeLoader
    paths = sorted(SCHEMAS_DIR.glob("*.schema.yaml"))
    assert len(paths) > 10
    for p in paths:
        text = p.read_text(encoding="utf-8")
        assert schema(p.name.removesuffix(".schema.yaml")) == yaml.safe_load(text), p.name
