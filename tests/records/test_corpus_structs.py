"""The export's typed mirrors of two schemas, each may be stricter than its schema (what
it refuses goes the reference way), never looser: grumem.corpus.log_line (the
one-pass decoder of log lines, which also reads a line as the reference does) and
grumem.corpus.trajectory_check (the check of every corpus line written)."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps
from grumem.corpus.log_line import decode_line
from grumem.corpus.trajectory import record_bytes
from grumem.corpus.trajectory_check import fast_check
from grumem.errors import RecordError
from grumem.io.jsonl import read_jsonl, validate
from grumem.stages.export import TRAJECTORIES, export
from support.checkout import FIXTURES_DIR
from support.export import calibrate, inputs

LOG = FIXTURES_DIR / "export" / "log.jsonl"
LINES: list[dict[str, Any]] = list(read_jsonl(LOG, "log"))

# values of every JSON type, and the edges of the schema's integer minimums
VALUES = [None, True, False, 0, -1, 1, 2.0, 1.5, "", "x", "L3", "a" * 64, [], [1], {}, {"x": 1}]


def _with_earlier_ask(line: dict[str, Any]) -> dict[str, Any]:
    """A line with one re-ask (the fixture has none), its parts copied from the line."""
    out = copy.deepcopy(line)
    out["earlier_asks"] = [
        {
            "ask": 0,
            "request": line["request"],
            "response": {**line["response"], "body_b64": None},
            "content": line["content"],
            "finish_reason": line["finish_reason"],
            "parsed": False,
            "parse_error": {"tag": "check", "reason": "missing"},
        }
    ]
    out["response_model"] = "m"
    return out


BASES = [*LINES, _with_earlier_ask(next(x for x in LINES if x["status"] == "ok"))]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _set(record: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> Any:
    out = copy.deepcopy(record)
    node = out
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def _schema_accepts(record: Any, schema: str = "log") -> bool:
    try:
        validate(record, schema)
    except RecordError:
        return False
    return True


def test_decodes_every_fixture_line_as_the_reference_reads_it():
    """The fast path is taken for real lines (else it would prove nothing) and
    yields the same values the dict of the reference path holds."""
    for base in BASES:
        line = decode_line(dumps(base).encode())
        assert line is not None
        for name, value in base.items():
            got = line[name]
            if isinstance(value, dict):
                got = {k: got[k] for k in value}  # a struct holds the keys read
            elif name == "earlier_asks":
                got = [{k: a[k] for k in v} for a, v in zip(got, value, strict=True)]
                value = [{k: v[k] for k in v} for v in value]
            assert msgspec.to_builtins(got) == value, name
        assert line.get("response_model") == base.get("response_model")


def test_absent_optional_field_reads_as_missing():
    line = decode_line(dumps(LINES[0]).encode())
    assert "response_model" not in LINES[0]
    assert line.get("response_model") is None
    with pytest.raises(AttributeError):
        line["no_such_field"]


@pytest.mark.parametrize("base", range(len(BASES)))
def test_every_single_field_mutation_accepted_only_if_the_schema_accepts_it(base):
    """Every field of a line (nested ones too) set to each JSON type, deleted, or
    given an unknown sibling: whatever the decoder accepts, the schema accepts."""
    record = BASES[base]
    accepted = refused = 0
    for path in _paths(record):
        mutants = [_set(record, path, v) for v in VALUES]
        mutants.append(_set(record, path, None, delete=True))
        if len(path) == 1 or isinstance(path[-1], str):
            mutants.append(_set(record, (*path[:-1], "extra_field"), 1))
        for m in mutants:
            if decode_line(dumps(m).encode()) is None:
                refused += 1
            else:
                accepted += 1
                assert _schema_accepts(m), (path, m)
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
        paths = _paths(record)
        if not paths:
            break
        record = _set(record, paths[index % len(paths)], value, delete)
    if decode_line(dumps(record).encode()) is not None:
        assert _schema_accepts(record)


@pytest.mark.parametrize(
    "raw",
    [
        b"\n",
        b"{\n",
        b"\xff\n",
        b"[]\n",
        # a lone surrogate, NaN, and an integer past 64 bits
        dumps(LINES[0]).replace('"t":1', '"t":1,"x":"\\ud800"').encode(),
        dumps(LINES[0]).replace('"sample":0', '"sample":NaN').encode(),
    ],
)
def test_what_only_the_reference_path_can_explain_is_refused(raw):
    assert decode_line(raw) is None


def test_a_huge_integer_is_read_exactly():
    line = json.loads(dumps(LINES[0]))
    line["sample"] = 2**70
    assert decode_line(dumps(line).encode())["sample"] == 2**70


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The fixture's trajectories as exported, plus one with a re-ask and an abort."""
    work = tmp_path_factory.mktemp("export")
    for name in ("log.jsonl", "labels.jsonl", "calibration.jsonl", "chunks.jsonl"):
        (work / name).write_bytes((FIXTURES_DIR / "export" / name).read_bytes())
    calibrate(work)
    export(inputs(work))
    records = list(read_jsonl(work / "corpus" / TRAJECTORIES, "trajectory"))
    extra = copy.deepcopy(records[0])
    turn = extra["turns"][0]
    turn["earlier_asks"] = [
        {"ask": 0, "request_sha256": "x", "response": None, "parsed": False, "parse_error": {}}
    ]
    extra["aborted"] = {"t": 3, "reason": "budget", "component": "section"}
    extra["r_exit"], extra["r_exit_reason"] = None, "aborted"
    return [*records, extra]


def test_every_exported_trajectory_passes_the_fast_check(corpus):
    for record in corpus:
        assert _schema_accepts(record, "trajectory")
        assert fast_check(record), record["trajectory_id"]


def test_trajectory_mutations_pass_the_fast_check_only_if_the_schema_accepts_them(corpus):
    """Every field of every trajectory (nested ones too) set to each JSON type, deleted,
    or given an unknown sibling, plus each r_exit value: whatever the fast check
    accepts, the schema accepts."""
    accepted = refused = 0
    for record in corpus:
        mutants = [_set(record, ("r_exit",), v) for v in (0, 0.0, -0.75, -0.5, -1, 0.5, False)]
        for path in _paths(record):
            mutants += [_set(record, path, v) for v in VALUES]
            mutants.append(_set(record, path, None, delete=True))
            if len(path) == 1 or isinstance(path[-1], str):
                mutants.append(_set(record, (*path[:-1], "extra_field"), 1))
        for m in mutants:
            if fast_check(m):
                accepted += 1
                assert _schema_accepts(m, "trajectory"), m
            else:
                refused += 1
    assert accepted and refused


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    advantages=st.lists(st.none() | st.floats(allow_nan=False), min_size=3, max_size=3),
    parse_error=st.dictionaries(st.text(), JSON, max_size=3),
)
def test_record_bytes_are_what_dumps_writes(corpus, advantages, parse_error):
    """orjson writes the line only where it agrees with the reference byte for byte:
    tiny, huge and negative-zero floats, odd parse errors included."""
    record = copy.deepcopy(corpus[-1])
    for turn in record["turns"]:
        turn["advantage"], turn["advantage_traj"], turn["advantage_turn"] = advantages
        for ask in turn["earlier_asks"]:
            ask["parse_error"] = parse_error
    assert record_bytes(record) == dumps(record).encode("utf-8")
