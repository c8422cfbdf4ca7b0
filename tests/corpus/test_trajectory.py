"""Reward assembly (grumem.corpus.trajectory): labels joined by chunk_sha, rewards from
what was recorded (never from where the loop stopped), and each trajectory's record,
checked and written as the reference writer writes it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps, sha256_text
from grumem.errors import MissingLabelsError, RecordError, RecordShapeError
from grumem.io.jsonl import read_jsonl, sha256_file
from grumem.io.typed import encode_checked
from grumem.records.summary import CorpusSummary
from grumem.records.trajectory import Trajectory
from grumem.stages.export import SUMMARY, TURNS, export, format_summary
from support.export import (
    T2,
    assert_nothing_written,
    by_id,
    calibrate,
    exported,
    inputs,
    log_lines,
    rewrite_log,
    trajectories,
)
from support.schema_data import an_integral_float_in, mutants, mutated, schema_accepts


def test_missing_label_fails_naming_count(work: Path) -> None:
    # drop the label of q1/s-beta t=5: a chunk visited by two trajectories (T2, T3)
    log = log_lines(work)
    sha = next(r["chunk_sha"] for r in log if r["trajectory_id"] == T2 and r["t"] == 5)
    lines = (work / "labels.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [x for x in lines if not (sha in x and '"q1"' in x)]
    assert len(kept) == len(lines) - 1
    (work / "labels.jsonl").write_text("".join(kept), encoding="utf-8")
    calibrate(work)
    with pytest.raises(MissingLabelsError) as e:
        export(inputs(work))
    assert e.value.count == 2
    msg = str(e.value)
    assert msg.startswith("2 turn(s) have no label in")
    assert f"{T2} t=5" in msg and "demo/q1/s-beta/1 t=5" in msg and sha[:12] in msg
    assert_nothing_written(work / "corpus")


def test_rechunked_session_fails_not_joined_by_t(work: Path) -> None:
    # labels made for other chunks: same t, other shas. A join by t would pass silently
    lines = []
    for rec in read_jsonl(work / "labels.jsonl", "label"):
        rec["chunk_sha"] = sha256_text("re-chunked " + rec["chunk_sha"])
        lines.append(dumps(rec) + "\n")
    (work / "labels.jsonl").write_text("".join(lines), encoding="utf-8")
    # `grumem kappa` refuses a calibration of chunks the project does not have, so
    # the κ record is re-stamped for these labels: the export's join is under test
    kappa = json.loads((work / "kappa.json").read_text(encoding="utf-8"))
    kappa["labels_sha256"] = sha256_file(work / "labels.jsonl")
    (work / "kappa.json").write_text(json.dumps(kappa), encoding="utf-8")
    with pytest.raises(MissingLabelsError) as e:
        export(inputs(work))
    assert e.value.count == 24
    assert "(first 5 shown)" in str(e.value)


def test_chunk_files_give_whole_session_evidence(work: Path) -> None:
    # An L2 run stops at its first exit: T3 exits at t=2 and never visits t=5,
    # the last evidence. Only the chunk files can tell that the exit was early.
    def l2_stop(i, rec):
        if rec["trajectory_id"] != "demo/q1/s-beta/1":
            return rec
        return {**rec, "level": "L2"} if rec["t"] <= 2 else None

    rewrite_log(work, l2_stop)
    export(inputs(work, out="turns-only"))
    t3 = next(
        t for t in trajectories(work / "turns-only") if t["trajectory_id"] == "demo/q1/s-beta/1"
    )
    assert (t3["t_exit"], t3["t_last_evidence"], t3["r_exit"]) == (2, 2, 0)  # blind to t=5
    summary = CorpusSummary.decode((work / "turns-only" / SUMMARY).read_bytes())
    assert summary.levels.to_dict() == {"L1": 4, "L2": 1}
    assert "pass --chunks" in format_summary(summary)
    summary = export(inputs(work, out="sessions", chunks=(str(work / "chunks.jsonl"),)))
    t3 = next(
        t for t in trajectories(work / "sessions") if t["trajectory_id"] == "demo/q1/s-beta/1"
    )
    assert (t3["t_exit"], t3["t_last_evidence"], t3["r_exit"]) == (2, 5, -0.75)
    assert summary.inputs.t_last_evidence_over == "session chunks"


def test_chunk_files_must_match_the_log(work: Path) -> None:
    lines = (work / "chunks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    rec = json.loads(lines[1])  # s-alpha t=2, re-chunked since the run
    rec["records"][0]["text"] += " (edited)"
    lines[1] = dumps(rec) + "\n"
    (work / "chunks.jsonl").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(RecordError, match="re-chunked"):
        export(inputs(work, chunks=(str(work / "chunks.jsonl"),)))
    assert_nothing_written(work / "corpus")


def test_aborted_trajectory_has_no_r_exit(work: Path) -> None:
    """T5 was stopped by the budget at t=3 with no recorded end: where the loop
    stopped is no decision of the model, so r_exit is null with its reason (not
    −0.5 late, as if it had exited at t=2). Counted apart."""
    summary = export(inputs(work))
    t5 = by_id(work / "corpus")["demo/q2/s-beta/0"]
    assert t5["aborted"]["reason"] == "budget"
    assert t5["t_last_evidence"] == 1
    assert (t5["r_exit"], t5["r_exit_reason"], t5["t_exit"]) == (None, "aborted", None)
    assert summary.r_exit.aborted == 1 and summary.r_exit.late == 1
    rows = pq.read_table(work / "corpus" / TURNS).column("extra_info").to_pylist()
    t5_rows = [r for r in rows if r["trajectory_id"] == "demo/q2/s-beta/0"]
    assert {(r["r_exit"], r["r_exit_reason"]) for r in t5_rows} == {(None, "aborted")}


def test_l2_server_failure_before_evidence_has_no_r_exit(work: Path) -> None:
    """An L2 trajectory whose request failed at t=2, before its evidence at t=5: it
    never exited, so no r_exit (not −0.75 early, with the whole session's chunks)."""
    log = log_lines(work)
    t6_abort = next(r for r in log if r["trajectory_id"] == "demo/q1/s-gamma/0")
    t3 = [r for r in log if r["trajectory_id"] == "demo/q1/s-beta/1"]
    abort = {
        **t6_abort,
        **{k: t3[1][k] for k in ("trajectory_id", "query_id", "session", "sample", "t")},
        "chunk_sha": t3[1]["chunk_sha"],
        "memory_before": t3[0]["memory_after"],
        "memory_after": t3[0]["memory_after"],
    }

    def l2_fail(i, rec):
        if rec["trajectory_id"] != "demo/q1/s-beta/1":
            return rec
        if rec["t"] == 1:
            return {**rec, "level": "L2"}
        return {**abort, "level": "L2"} if rec["t"] == 2 else None

    rewrite_log(work, l2_fail)
    summary = export(inputs(work, chunks=(str(work / "chunks.jsonl"),)))
    t3 = by_id(work / "corpus")["demo/q1/s-beta/1"]
    assert [t["t"] for t in t3["turns"]] == [1] and t3["turns"][0]["exit_gate"] is False
    assert t3["aborted"]["reason"] == "request_failed" and t3["t_last_evidence"] == 5
    assert (t3["r_exit"], t3["r_exit_reason"], t3["t_exit"]) == (None, "aborted", None)
    assert summary.r_exit.early == 0 and summary.r_exit.aborted == 2


def test_ran_out_of_chunks_keeps_the_last_turn(work: Path) -> None:
    """No `end` recorded, not aborted: t_exit is the last chunk."""

    def no_end(i, rec):
        if rec["trajectory_id"] == "demo/q1/s-alpha/0" and rec["exit_gate"]:
            return {**rec, "exit_gate": False}
        return rec

    rewrite_log(work, no_end)
    t1 = by_id(exported(work))["demo/q1/s-alpha/0"]
    assert (t1["t_exit"], t1["t_last_evidence"], t1["r_exit"], t1["r_exit_reason"]) == (
        4,
        2,
        -0.5,
        None,
    )


def test_no_parsed_turn_has_no_r_exit(work: Path) -> None:
    """No turn of T1 parsed, so no exit gate was recorded at all: no r_exit (not one
    derived from the last turn, as if the model had decided to stop)."""
    nulls = dict.fromkeys(("update_gate", "exit_gate", "candidate", "think"))

    def unparsed(i, rec):
        if rec["trajectory_id"] != "demo/q1/s-alpha/0":
            return rec
        error = {"tag": "think", "reason": "missing", "raw": rec["content"][:50]}
        return {
            **rec,
            **nulls,
            "parsed": False,
            "parse_error": error,
            "memory_after": None,
            "memory_before": None,
        }

    rewrite_log(work, unparsed)
    summary = export(inputs(work))
    t1 = by_id(work / "corpus")["demo/q1/s-alpha/0"]
    assert t1["t_last_evidence"] == 2 and t1["r_format"] == 0
    assert (t1["r_exit"], t1["r_exit_reason"], t1["t_exit"]) == (None, "no_exit_gate", None)
    assert summary.r_exit.no_exit_gate == 1


def test_reask_makes_r_format_zero(work: Path) -> None:
    """T1 t=2 parsed on its second ask; the first ask's malformed answer
    stays under its turn and makes r_format 0."""
    log = log_lines(work)
    t2_alpha = log[1]
    content = "I think the pods are in monitoring."
    rbody = dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
    earlier = {
        "ask": 0,
        "request": {"body": t2_alpha["request"]["body"], "sha256": t2_alpha["request"]["sha256"]},
        "response": {**t2_alpha["response"], "body": rbody, "sha256": sha256_text(rbody)},
        "content": content,
        "finish_reason": None,
        "parsed": False,
        "parse_error": {"tag": "think", "reason": "missing", "raw": content},
    }
    rewrite_log(work, lambda i, r: {**r, "asks": 2, "earlier_asks": [earlier]} if i == 2 else r)
    summary = export(inputs(work))
    t1 = by_id(work / "corpus")["demo/q1/s-alpha/0"]
    assert all(t["parsed"] for t in t1["turns"]) and t1["r_format"] == 0
    assert t1["turns"][1]["earlier_asks"] == [
        {
            "ask": 0,
            "request_sha256": t2_alpha["request"]["sha256"],
            "response": content,
            "parsed": False,
            "parse_error": earlier["parse_error"],
        }
    ]
    assert summary.reasks.to_dict() == {"turns": 1, "asks": 1}
    assert summary.r_format.pass_ == 3
    # the earlier ask's text is checked against its body like the last one's
    rewrite_log(
        work,
        lambda i, r: {**r, "earlier_asks": [{**earlier, "content": "edited"}]} if i == 2 else r,
    )
    with pytest.raises(RecordError) as e:
        export(inputs(work, out="again"))
    assert (e.value.line, e.value.field) == (2, "earlier_asks.0.content")


def test_every_exported_trajectory_passes_the_check(corpus, tmp_path: Path):
    for record in corpus:
        assert schema_accepts(record, "trajectory")
        typed = Trajectory.convert(record)
        assert typed.to_dict() == record
        line = encode_checked(typed, Trajectory, tmp_path / "t.jsonl", 1)
        assert line == dumps(record).encode("utf-8")


def test_trajectory_mutations_pass_the_check_exactly_when_the_schema_accepts_them(corpus):
    """Every field of every trajectory (nested ones too) set to each JSON type, deleted,
    or given an unknown sibling, plus each r_exit value: the check the export runs on
    each line it writes (its class decoding it) accepts what the schema accepts, and
    names the field otherwise."""
    accepted = refused = 0
    for record in corpus:
        ms = [mutated(record, ("r_exit",), v) for v in (0, 0.0, -0.75, -0.5, -1, 0.5, False)]
        for m in ms + mutants(record):
            try:
                Trajectory.decode(dumps(m).encode("utf-8"))
            except RecordShapeError as e:
                assert e.why, str(e)
                refused += 1
                if schema_accepts(m, "trajectory"):
                    assert an_integral_float_in(m), m
            else:
                accepted += 1
                assert schema_accepts(m, "trajectory"), m
    assert accepted and refused


def test_a_trajectory_built_wrong_is_refused_naming_its_field(corpus, tmp_path: Path):
    """A record's constructor checks no type: the export's writer does, before the line
    is written."""
    record = Trajectory.convert(corpus[0])
    path = tmp_path / "trajectories.jsonl"
    turn = msgspec.structs.replace(record.turns[1], r_update=0)
    for bad, field in [
        (msgspec.structs.replace(record, r_format=2), "r_format"),
        (msgspec.structs.replace(record, turns=[record.turns[0], turn]), "turns.1.r_update"),
        (msgspec.structs.replace(record, turns=[]), "turns"),
    ]:
        with pytest.raises(RecordError) as e:
            encode_checked(bad, Trajectory, path, 7)
        assert (e.value.path, e.value.line, e.value.field) == (str(path), 7, field), str(e.value)


# a parse failure's keys in the schema's order, as the log holds them
PARSE_ERROR = st.builds(
    lambda tag, reason, raw: {"tag": tag, "reason": reason, "raw": raw},
    st.sampled_from(["think", "check", "update", "next", "response"]),
    st.text(),
    st.text(),
)


@settings(max_examples=200, deadline=None)
@given(
    advantages=st.lists(st.none() | st.floats(allow_nan=False), min_size=3, max_size=3),
    parse_error=PARSE_ERROR,
)
def test_record_bytes_are_what_dumps_writes(corpus, advantages, parse_error):
    """A trajectory's line is msgspec's only where it agrees with the reference byte for
    byte: tiny, huge and negative-zero floats, odd parse errors included."""
    record = copy.deepcopy(corpus[-1])
    for turn in record["turns"]:
        turn["advantage"], turn["advantage_traj"], turn["advantage_turn"] = advantages
        for ask in turn["earlier_asks"]:
            ask["parse_error"] = parse_error
    assert Trajectory.convert(record).encode() == dumps(record).encode("utf-8")
