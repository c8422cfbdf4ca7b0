"""Record lines read and written through grumem.io.typed: every log line decoded and
checked in one C pass (a line the class refuses goes the reference way, which names
what is wrong or accepts it), documents checked as their record, and records checked
by their class before they are written. The export's trajectories through it:
tests/corpus/test_trajectory.py."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps
from grumem.errors import GrumemError, RecordError
from grumem.io.jsonl import read_jsonl, write_jsonl
from grumem.io.typed import checked_document, decode_line, read_checked, read_records, write_records
from grumem.records.base import or_none
from grumem.records.chunk import ChunkLine
from grumem.records.kappa import KappaCalibration
from grumem.records.label import Label
from grumem.records.log import LogLine
from grumem.records.trajectory import Trajectory
from support.checkout import FIXTURES_DIR
from support.schema_data import (
    VALUES,
    an_integral_float_in,
    mutants,
    mutated,
    paths,
    schema_accepts,
)

LOG = FIXTURES_DIR / "export" / "log.jsonl"
LINES: list[dict[str, Any]] = list(read_jsonl(LOG, "log"))


def _with_earlier_ask(line: dict[str, Any]) -> dict[str, Any]:
    """A line with one re-ask (the fixture has none), its parts copied from the line."""
    out = copy.deepcopy(line)
    out["earlier_asks"] = [
        {
            "ask": 0,
            "request": line["request"],
            "response": {**line["response"], "body_b64": "", "endpoint": "http://e/v1"},
            "content": line["content"],
            "finish_reason": line["finish_reason"],
            "parsed": False,
            "parse_error": {"tag": "check", "reason": "missing", "raw": "x"},
        }
    ]
    out["response_model"] = "m"
    return out


BASES = [*LINES, _with_earlier_ask(next(x for x in LINES if x["status"] == "ok"))]


def decoded(record: Any) -> LogLine | None:
    """The line through the one-pass decoder alone: None when the class refuses it."""
    try:
        return LogLine.decode(dumps(record).encode())
    except GrumemError:
        return None


def test_decodes_every_fixture_line_as_the_reference_reads_it():
    """The fast path is taken for real lines (else it would prove nothing) and holds
    the values the reference path's dict holds."""
    for base in BASES:
        line = decoded(base)
        assert line is not None
        assert line.to_dict() == base
        for name, value in base.items():
            assert msgspec.to_builtins(getattr(line, name)) == value, name
        assert or_none(line.response_model) == base.get("response_model")


def test_absent_optional_field_reads_as_missing():
    line = decoded(LINES[0])
    assert line is not None
    assert "response_model" not in LINES[0]
    assert or_none(line.response_model) is None and line.response_model is msgspec.UNSET
    assert "response_model" not in line.to_dict()
    with pytest.raises(AttributeError):
        line.no_such_field  # noqa: B018 (reading it is the test)


@pytest.mark.parametrize("base", range(len(BASES)))
def test_every_single_field_mutation_accepted_exactly_when_the_schema_accepts_it(base):
    """Every field of a line (nested ones too) set to each JSON type, deleted, or given
    an unknown sibling: the decoder accepts what the schema accepts, and only that (a
    float where an integer goes is the one thing only the schema takes: `t: 1.0`)."""
    record = BASES[base]
    accepted = refused = 0
    for m in mutants(record):
        by_schema, line = schema_accepts(m, "log"), decoded(m)
        if line is None:
            refused += 1
            if by_schema:
                assert an_integral_float_in(m), m
        else:
            accepted += 1
            assert by_schema, m
    assert accepted and refused  # both branches met


@settings(max_examples=300, deadline=None)
@given(
    base=st.sampled_from(BASES),
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from(VALUES), st.booleans()),
        min_size=1,
        max_size=4,
    ),
)
def test_random_mutations_accepted_only_if_the_schema_accepts_them(base, edits):
    record = base
    for index, value, delete in edits:
        where = paths(record)
        if not where:
            break
        record = mutated(record, where[index % len(where)], value, delete)
    if decoded(record) is not None:
        assert schema_accepts(record, "log")


def _write(tmp_path: Path, *lines: bytes) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


@pytest.mark.parametrize(
    "raw, why",
    [
        (b"", "blank line"),
        (b"{", "bad JSON"),
        (b"\xff", "not UTF-8"),
        (b"[]", "is not of type 'object'"),
        # a lone surrogate, NaN (no JSON to msgspec), and a value the schema refuses
        (dumps(LINES[0]).replace('"t":1', '"t":1,"x":"\\ud800"').encode(), "lone surrogate"),
        (dumps(LINES[0]).replace('"sample":0', '"sample":NaN').encode(), "not of type 'integer'"),
        (dumps(LINES[0]).replace('"t":1', '"t":0').encode(), "less than the minimum of 1"),
    ],
)
def test_what_the_class_refuses_the_reference_path_names(tmp_path: Path, raw: bytes, why: str):
    path = _write(tmp_path, dumps(LINES[0]).encode(), raw)
    with pytest.raises(RecordError) as e:
        list(read_records(path, LogLine))
    assert (e.value.path, e.value.line) == (str(path), 2) and why in e.value.why, str(e.value)


def test_a_line_only_the_reference_path_reads_is_typed_from_it(tmp_path: Path):
    """NaN is no JSON to msgspec; the stdlib reads it and the schema takes it as a number."""
    raw = dumps(LINES[1]).replace('"latency_s":0.25', '"latency_s":NaN').encode()
    assert raw != dumps(LINES[1]).encode()
    with pytest.raises(GrumemError):
        LogLine.decode(raw)
    [(_, one), (_, line)] = read_records(_write(tmp_path, dumps(LINES[0]).encode(), raw), LogLine)
    assert isinstance(line, LogLine) and line.response is not None
    assert math.isnan(line.response.latency_s)
    assert line.encode() == raw  # and written back as the stdlib writes it


def test_what_only_the_class_refuses_is_named(tmp_path: Path, corpus):
    """An integral float where the schema's integer enum is: the schema takes 1.0 for 1,
    the class does not (no writer writes it); the refusal names the field."""
    record = copy.deepcopy(LINES[0])
    record["response"]["attempt"] = 1.0
    assert not schema_accepts(record, "log")  # `integer` is strict: refused by both
    trajectory = copy.deepcopy(corpus[0])
    trajectory["r_format"] = 1.0
    assert schema_accepts(trajectory, "trajectory")
    path = tmp_path / "t.jsonl"
    path.write_text(dumps(trajectory) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as e:
        list(read_records(path, Trajectory))
    assert (e.value.line, e.value.field) == (1, "r_format"), str(e.value)


def test_a_huge_integer_is_read_exactly():
    line = json.loads(dumps(LINES[0]))
    line["sample"] = 2**70
    typed = decoded(line)
    assert typed is not None and typed.sample == 2**70
    assert typed.encode() == dumps(line).encode()


def test_open_values_nested_past_the_limit_go_the_reference_way(tmp_path: Path):
    """A chunk record's `source` may hold any JSON: nested deeper than the readers'
    limit, the line is refused naming its depth, as the reference path does."""
    deep = {"role": "user", "text": "hi", "source": {"x": "@@"}}
    line = dumps({"session": "s", "index": 0, "records": [deep]})
    nested = "[" * 300 + "]" * 300
    path = tmp_path / "c.jsonl"
    path.write_text(line.replace('"@@"', nested) + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match="nested 304 deep"):
        list(read_records(path, ChunkLine))
    shallow = "[" * 200 + "]" * 200
    path.write_text(line.replace('"@@"', shallow) + "\n", encoding="utf-8")
    [(_, chunk)] = read_records(path, ChunkLine)
    assert chunk.records[0].source == {"x": json.loads(shallow)}


def test_open_records_are_checked_by_their_class_and_kept_as_read(tmp_path: Path):
    """A chunk's records carry fields of their own: checked by ChunkLine, the line is
    handed on as read, those fields included; a line it refuses is named."""
    record = {"role": "user", "text": "hi", "source": {"file": "a"}, "tool": {"id": 7}}
    line = {"session": "s", "index": 0, "records": [record], "mine": [1]}
    bad = {**line, "index": 1, "records": [{**record, "role": "robot"}]}
    path = tmp_path / "c.jsonl"
    path.write_text(dumps(line) + "\n" + dumps(bad) + "\n", encoding="utf-8")
    rows = read_checked(path, ChunkLine)
    assert next(rows) == (1, line)
    with pytest.raises(RecordError) as e:
        next(rows)
    assert (e.value.line, e.value.field) == (2, "records.0.role"), str(e.value)


def test_a_document_is_its_record_or_its_field_is_named(tmp_path: Path):
    kappa = {
        "kappa": 0.8,
        "n": 30,
        "observed_agreement": 0.9,
        "expected_agreement": 0.5,
        "confusion": {"yes_yes": 10, "yes_no": 1, "no_yes": 2, "no_no": 17},
        "min_calibration": 20,
        "labels_path": "labels.jsonl",
        "labels_sha256": "a" * 64,
        "calibration_path": "calibration.jsonl",
        "calibration_sha256": "b" * 64,
    }
    typed = checked_document(kappa, KappaCalibration, tmp_path / "kappa.json")
    assert typed.to_dict() == kappa
    kappa["confusion"]["no_no"] = -1
    with pytest.raises(RecordError) as e:
        checked_document(kappa, KappaCalibration, tmp_path / "kappa.json")
    assert e.value.field == "confusion.no_no" and "minimum" in e.value.why, str(e.value)


def test_written_records_are_checked_and_the_bytes_are_the_jsonl_writers(tmp_path: Path):
    labels = [Label(query_id="q", chunk_sha="a" * 64, evidence=True, annotator="a")]
    assert write_records(tmp_path / "typed.jsonl", labels, Label) == 1
    write_jsonl(tmp_path / "dicts.jsonl", [x.to_dict() for x in labels], "label")
    assert (tmp_path / "typed.jsonl").read_bytes() == (tmp_path / "dicts.jsonl").read_bytes()
    bad = [*labels, Label(query_id="", chunk_sha="a" * 64, evidence=True, annotator="a")]
    with pytest.raises(RecordError) as e:
        write_records(tmp_path / "bad.jsonl", bad, Label)
    assert (e.value.line, e.value.field) == (2, "query_id"), str(e.value)
    assert not (tmp_path / "bad.jsonl").exists()  # nothing half-written


def test_decode_line_is_the_readers_one_call():
    raw = dumps(LINES[1]).encode()
    assert decode_line("log.jsonl", 2, raw, LogLine) == LogLine.decode(raw)
