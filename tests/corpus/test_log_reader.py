"""The turn log as the export reads it (grumem.corpus.log_reader): lines checked across
fields and grouped into trajectories, a bad line named by its number, and each turn's
text taken from its sha-checked recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from grumem.core.json_text import dumps
from grumem.errors import RecordError
from grumem.stages.export import export
from support.export import assert_nothing_written, inputs, log_lines, rewrite_log


@pytest.mark.parametrize(
    "edit, field, why",
    [
        (lambda i, r: None if i == 3 else r, "t", "expects t=3 here, found 4"),
        (
            lambda i, r: {**r, "trajectory_id": "demo/q1/s-alpha/0"} if i == 20 else r,
            "trajectory_id",
            "appears again",
        ),
        (lambda i, r: {**r, "sample": 9} if i == 2 else r, "sample", "differs"),
        (lambda i, r: {**r, "update_gate": None} if i == 1 else r, "update_gate", "gate is null"),
        (lambda i, r: {**r, "update_gate": True} if i == 7 else r, "update_gate", "defaulted"),
        (lambda i, r: {**r, "t": 0} if i == 1 else r, "t", "minimum"),
    ],
)
def test_bad_log_fails_naming_line(work: Path, edit, field, why) -> None:
    rewrite_log(work, edit)
    with pytest.raises(RecordError) as e:
        export(inputs(work))
    assert e.value.field == field and why in e.value.why, str(e.value)
    assert e.value.line is not None
    assert_nothing_written(work / "corpus")


def test_log_after_abort_fails(work: Path) -> None:
    log = log_lines(work)
    abort = next(r for r in log if r["trajectory_id"] == "demo/q2/s-beta/0" and r["t"] == 3)
    extra = {**log[log.index(abort) - 1], "t": 4}
    (work / "log.jsonl").write_text(
        "".join(dumps(r) + "\n" for r in [*log[:25], extra, log[25]]), encoding="utf-8"
    )
    with pytest.raises(RecordError, match="continues after its abort"):
        export(inputs(work))


def _edit_body(rec: dict, old: str, new: str) -> dict:
    body = rec["response"]["body"]
    assert old in body
    return {**rec, "response": {**rec["response"], "body": body.replace(old, new, 1)}}


@pytest.mark.parametrize(
    "edit, field",
    [
        # the text the corpus trains on, edited; the recorded body still says the original
        (lambda r: {**r, "content": r["content"].replace("yes", "no", 1)}, "content"),
        # one byte of the body (its sha256 no longer matches)
        (lambda r: _edit_body(r, "Turn 5", "Turn 6"), "response.sha256"),
        # a byte turned into U+FFFD: the check covers such bodies too
        (lambda r: _edit_body(r, "Turn 5", "Turn \ufffd"), "response.sha256"),
    ],
    ids=["content", "body byte", "body U+FFFD"],
)
def test_exported_text_comes_from_the_recording(work: Path, edit, field) -> None:
    """Each turn's text is the sha-checked recorded body's; an edited log
    fails naming its line."""
    rewrite_log(work, lambda i, r: edit(r) if i == 9 else r)
    with pytest.raises(RecordError) as e:
        export(inputs(work))
    assert e.value.path.endswith("log.jsonl") and e.value.line == 9
    assert e.value.field == field
    assert_nothing_written(work / "corpus")
