"""grumem.records.rollout_row against workflow/schemas/rollout-row.schema.yaml: the same
fields in the same order, and, for every single-field change of a demo row, the typed
record accepts exactly what the schema accepts."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.errors import RecordError, RolloutRowError
from grumem.io.jsonl import schema, validate
from grumem.records.rollout_row import RolloutRow
from support.rollout_rows import demo_rollout_rows
from support.schema_data import mutated, paths

ROWS = demo_rollout_rows()
# values of every JSON type, and the edges of the schema's minimums, enums and patterns
VALUES = [None, True, False, 0, -1, 1, 2.0, 0.5, 1.5, "", "x", "L2", "yes", "rule", "user"]
VALUES += ["a" * 64, "A" * 64, [], [1], ["yes"], {}, {"x": 1}]


def _schema_accepts(row: Any) -> bool:
    try:
        validate(row, "rollout-row")
    except RecordError:
        return False
    return True


def _record_accepts(row: Any) -> bool:
    try:
        RolloutRow.convert(row)
    except RolloutRowError:
        return False
    return True


def _fields(info: msgspec.inspect.StructType, node: dict[str, Any], at: tuple = ()) -> list:
    """(path, field names, the schema's property names) of a struct and those inside it."""
    out = [(at, tuple(f.name for f in info.fields), tuple(node["properties"]))]
    for f in info.fields:
        sub, t = node["properties"][f.name], f.type
        if isinstance(t, msgspec.inspect.ListType):
            sub, t = sub["items"], t.item_type
        if isinstance(t, msgspec.inspect.StructType):
            out += _fields(t, sub, (*at, f.name))
    return out


def test_the_records_fields_are_the_schemas_properties_in_order() -> None:
    info = msgspec.inspect.type_info(RolloutRow)
    seen = _fields(info, schema("rollout-row"))
    assert len(seen) == 7  # the row, message, reward_model, extra_info, chunk, budget, weights
    for path, fields, properties in seen:
        assert fields == properties, path
    # the schema requires every property: no field has a default
    assert all(f.required for f in info.fields)


def test_the_demo_rows_are_records_and_encode_back() -> None:
    for row in ROWS:
        record = RolloutRow.convert(row)
        assert record.to_dict() == row


@pytest.mark.parametrize("base", [0, 3])
def test_every_single_field_change_is_accepted_exactly_when_the_schema_accepts_it(base) -> None:
    """Every field of a row (nested ones too) set to each JSON type, deleted, or given an
    unknown sibling: the record and the schema agree on each."""
    row = ROWS[base]
    accepted = refused = 0
    for path in paths(row, items=2):
        mutants = [mutated(row, path, v) for v in VALUES]
        mutants.append(mutated(row, path, None, delete=True))
        if isinstance(path[-1], str):
            mutants.append(mutated(row, (*path[:-1], "extra_field"), 1))
        for m in mutants:
            ok = _schema_accepts(m)
            assert _record_accepts(m) == ok, (path, m if len(str(m)) < 400 else path)
            accepted += ok
            refused += not ok
    assert accepted > 50 and refused > 500  # both branches met


@settings(max_examples=200, deadline=None)
@given(
    base=st.sampled_from(ROWS),
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from(VALUES)), min_size=1, max_size=4
    ),
)
def test_random_changes_are_accepted_exactly_when_the_schema_accepts_them(base, edits) -> None:
    row = base
    for i, value in edits:
        where = paths(row, items=2)
        if not where:
            break
        row = mutated(row, where[i % len(where)], value)
    assert _record_accepts(row) == _schema_accepts(row)


def test_a_refusal_names_the_field() -> None:
    row = mutated(ROWS[0], ("extra_info", "chunks", 0, "chunk_sha"), "A" * 64)
    with pytest.raises(RolloutRowError, match=r"row 7: field 'extra_info\.chunks\.0\.chunk_sha'"):
        RolloutRow.convert(row, "row 7")


def test_a_sha_with_a_final_newline_is_refused() -> None:
    """The one place the record is stricter than the schema: Python's `$` in the
    schema's sha pattern matches before a final newline; the record's `\\Z` does not."""
    row = mutated(ROWS[0], ("extra_info", "template_sha256"), "a" * 64 + "\n")
    assert _schema_accepts(row)
    assert not _record_accepts(row)


def test_a_row_reads_its_chunks_with_their_turn_and_label() -> None:
    """What turn t of a rollout reads is read off the record: no second class of the row."""
    for value in ROWS:
        row = RolloutRow.convert(value)
        info, chunks = value["extra_info"], row.chunks
        assert [c.t for c in chunks] == list(range(1, len(info["chunks"]) + 1))
        assert [(c.text, c.chunk_sha) for c in chunks] == [
            (c["text"], c["chunk_sha"]) for c in info["chunks"]
        ]
        labels = value["reward_model"]["ground_truth"]
        assert [c.evidence for c in chunks] == [label == "yes" for label in labels]
        where = f"{info['project']}/{info['query_id']}/{info['session']}"
        assert row.where == f"sessions row {info['index']} ({where})"
    assert any(c.evidence for c in RolloutRow.convert(ROWS[0]).chunks)
    assert not all(c.evidence for v in ROWS for c in RolloutRow.convert(v).chunks)
