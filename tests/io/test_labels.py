"""Evidence labels (M5.1): schema, one label per (query_id, chunk_sha), the fast validator."""

from __future__ import annotations

from pathlib import Path

import fastjsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.core.json_text import dumps
from grumem.errors import RecordError
from grumem.io.jsonl import _validator, fast_validator, read_jsonl, read_jsonl_fast
from grumem.io.labels import load_labels
from support.checkout import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "export"
SHA = "ab" * 32


def label(query="q1", sha=SHA, evidence=True, annotator="a") -> dict:
    return {"query_id": query, "chunk_sha": sha, "evidence": evidence, "annotator": annotator}


def write(path: Path, records: list) -> str:
    path.write_text("".join(dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_fixture_labels() -> None:
    labels = load_labels(FIXTURE / "labels.jsonl")
    assert len(labels) == 26
    raw = list(read_jsonl(FIXTURE / "labels.jsonl", "label"))
    for r in raw:
        assert labels.get(r["query_id"], r["chunk_sha"]) is r["evidence"]
    assert labels.get("q1", "0" * 64) is None
    assert labels.get("q9", raw[0]["chunk_sha"]) is None  # keyed by query too


def test_duplicate_names_both_lines(tmp_path: Path) -> None:
    other = label(sha="cd" * 32)
    path = write(tmp_path / "l.jsonl", [label(), other, label(annotator="b")])
    with pytest.raises(RecordError) as e:
        load_labels(path)
    assert e.value.line == 3 and "duplicate" in e.value.why
    assert "line 1 says evidence=true, line 3 says evidence=true" in e.value.why


def test_conflict_names_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "l.jsonl", [label(), label(query="q2"), label(evidence=False)])
    with pytest.raises(RecordError) as e:
        load_labels(path)
    assert e.value.line == 3 and "conflicting" in e.value.why
    assert "line 1 says evidence=true, line 3 says evidence=false" in e.value.why


@pytest.mark.parametrize(
    "bad, field",
    [
        ({**label(), "chunk_sha": "XYZ"}, "chunk_sha"),
        ({k: v for k, v in label().items() if k != "evidence"}, "evidence"),
        ({**label(), "evidence": "yes"}, "evidence"),
        ({**label(), "t": 3}, "t"),
        ({**label(), "annotator": ""}, "annotator"),
    ],
)
def test_schema_errors_name_line_and_field(tmp_path: Path, bad, field) -> None:
    path = write(tmp_path / "l.jsonl", [label(sha="cd" * 32), bad])
    with pytest.raises(RecordError) as e:
        load_labels(path)
    assert (e.value.path, e.value.line, e.value.field) == (path, 2, field)


def test_blank_and_bad_json_lines(tmp_path: Path) -> None:
    p = tmp_path / "l.jsonl"
    p.write_text(dumps(label()) + "\n\n", encoding="utf-8")
    with pytest.raises(RecordError, match="blank line"):
        load_labels(p)
    p.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(RecordError, match="bad JSON"):
        load_labels(p)


json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "q", SHA, "L1", "ok"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


@given(st.sampled_from(["label", "log"]), st.data())
def test_fast_validator_agrees_with_jsonschema(name, data) -> None:
    """The compiled validator must accept exactly what the reference accepts."""
    base = (
        label() if name == "label" else next(read_jsonl_fast(str(FIXTURE / "log.jsonl"), "log"))[2]
    )
    record = dict(base)
    key = data.draw(st.sampled_from(sorted(record) + ["extra"]))
    if data.draw(st.booleans()):
        record.pop(key, None)
    else:
        record[key] = data.draw(json_value)
    reference = _validator(name).is_valid(record)
    try:
        fast_validator(name)(record)
        fast = True
    except fastjsonschema.JsonSchemaValueException:
        fast = False
    assert fast == reference, record
