"""Stage `labels`: the judge's shard outputs merged into one labels file."""

from __future__ import annotations

import json

import pytest

from grumem.errors import RecordError
from grumem.io.jsonl import read_jsonl
from grumem.stages.labels import merge


def test_merge_refuses_two_different_labels_for_a_pair(tmp_path):
    sha = "a" * 64
    for name, evidence in (("a", True), ("b", False)):
        line = {"query_id": "q", "chunk_sha": sha, "evidence": evidence, "annotator": "m"}
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(line) + "\n")
    (tmp_path / "u.jsonl").write_text("")
    with pytest.raises(RecordError, match=r"b\.jsonl:1: field 'evidence' .*says evidence=True"):
        merge(
            [tmp_path / "a.jsonl", tmp_path / "b.jsonl"],
            [tmp_path / "u.jsonl"],
            tmp_path / "out.jsonl",
            tmp_path / "uo.jsonl",
        )
    assert not (tmp_path / "out.jsonl").exists()


def test_merge_drops_an_unjudged_pair_another_shard_labelled(tmp_path):
    sha = "b" * 64
    label = {"query_id": "q", "chunk_sha": sha, "evidence": True, "annotator": "m"}
    failed = {
        "query_id": "q",
        "chunk_sha": sha,
        "reason": "request_failed",
        "request_sha256": "c" * 64,
        "parse_error": None,
        "detail": "status 500",
    }
    other = {**failed, "chunk_sha": "d" * 64}
    (tmp_path / "l.jsonl").write_text(json.dumps(label) + "\n")
    (tmp_path / "u.jsonl").write_text(json.dumps(other) + "\n" + json.dumps(failed) + "\n")
    stats = merge(
        [tmp_path / "l.jsonl"], [tmp_path / "u.jsonl"], tmp_path / "o.jsonl", tmp_path / "uo.jsonl"
    )
    assert (stats["labelled"], stats["request_failed"]) == (1, 1)
    assert [u["chunk_sha"] for u in read_jsonl(tmp_path / "uo.jsonl", "unjudged")] == ["d" * 64]
