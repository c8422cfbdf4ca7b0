"""Card 004 (M5.3), the corpus export: a1-a8 under the card's names, then refusals,
bad inputs and bytes, inputs left as they were, and rewards only from what was recorded.

The fixture is fixtures/export/ (see its README for the hand count the
assertions below repeat).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from grumem.core.chunk_text import render_records
from grumem.core.json_text import dumps, sha256_text
from grumem.corpus.card import CARD
from grumem.errors import ExportRefused, GrumemError, MissingLabelsError, RecordError
from grumem.io.jsonl import read_jsonl, sha256_file, validate
from grumem.io.template_files import load_prompt_builder
from grumem.records.return_weights import EQUAL_WEIGHTS
from grumem.stages.export import SUMMARY, TRAJECTORIES, TURNS, export, format_summary
from support.export import FILES, FIXTURE, calibrate, inputs, log_lines, rewrite_log, verl_rows

T2 = "demo/q1/s-beta/0"  # the a4 trajectory, with the unparsed turn at t=3


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The fixture copied to a temporary directory, with its kappa.json."""
    for name in FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    calibrate(tmp_path)
    return tmp_path


def trajectories(out: Path) -> list[dict]:
    return list(read_jsonl(out / TRAJECTORIES, "trajectory"))


def assert_nothing_written(out: Path) -> None:
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())


# ---------------------------------------------------------------- card 004


def test_a1_trajectory_grouping(work: Path) -> None:
    export(inputs(work))
    got = trajectories(work / "corpus")
    log = log_lines(work)
    # grouped by run, in the log's order; T6 (aborted before any answer) is not exported
    assert [t["trajectory_id"] for t in got] == [
        "demo/q1/s-alpha/0",
        T2,
        "demo/q1/s-beta/1",
        "demo/q2/s-alpha/0",
        "demo/q2/s-beta/0",
    ]
    for traj in got:
        ts = [turn["t"] for turn in traj["turns"]]
        assert ts == list(range(1, len(ts) + 1))  # t ascending, no gap
    # none lost: every ok line of the log is exactly one exported turn
    ok = [(r["trajectory_id"], r["t"], r["chunk_sha"]) for r in log if r["status"] == "ok"]
    exported = [(tr["trajectory_id"], t["t"], t["chunk_sha"]) for tr in got for t in tr["turns"]]
    assert exported == ok
    # the aborted line is not a turn; its trajectory says how it ended
    t5 = got[4]
    assert [t["t"] for t in t5["turns"]] == [1, 2]
    assert t5["aborted"] == {"t": 3, "reason": "budget", "component": "memory"}
    assert all(t["aborted"] is None for t in got[:4])


def test_a2_r_update_signs(work: Path) -> None:
    export(inputs(work))
    labels = {
        (r["query_id"], r["chunk_sha"]): r["evidence"]
        for r in read_jsonl(work / "labels.jsonl", "label")
    }
    n = 0
    for traj in trajectories(work / "corpus"):
        for turn in traj["turns"]:
            label = labels[traj["query_id"], turn["chunk_sha"]]  # joined by sha, not t
            assert turn["label"] == label
            expected = 1 if turn["update_gate"] is not None and turn["update_gate"] == label else -1
            assert turn["r_update"] == expected, (traj["trajectory_id"], turn["t"])
            n += 1
    assert n == 24
    # the README's per-turn signs, by hand
    signs = {
        t["trajectory_id"]: [x["r_update"] for x in t["turns"]]
        for t in trajectories(work / "corpus")
    }
    assert signs == {
        "demo/q1/s-alpha/0": [1, 1, -1, 1],
        T2: [1, 1, -1, -1, 1, 1, 1],
        "demo/q1/s-beta/1": [1, 1, 1, 1, -1, 1, 1],
        "demo/q2/s-alpha/0": [1, 1, -1, 1],
        "demo/q2/s-beta/0": [1, 1],
    }


def test_a3_r_format_strict(work: Path) -> None:
    export(inputs(work))
    by_id = {t["trajectory_id"]: t for t in trajectories(work / "corpus")}
    t2 = by_id[T2]
    unparsed = [t for t in t2["turns"] if not t["parsed"]]
    assert [t["t"] for t in unparsed] == [3]
    assert unparsed[0]["update_gate"] is None and unparsed[0]["exit_gate"] is None
    # one value for the whole trajectory, not per turn: no turn carries its own r_format
    assert t2["r_format"] == 0
    assert all("r_format" not in turn for turn in t2["turns"])
    assert {tid: t["r_format"] for tid, t in by_id.items() if tid != T2} == dict.fromkeys(
        set(by_id) - {T2}, 1
    )
    # every parquet row of T2 carries the trajectory's 0, parsed turns included
    rows = pq.read_table(work / "corpus" / TURNS).column("extra_info").to_pylist()
    t2_rows = [r for r in rows if r["trajectory_id"] == T2]
    assert len(t2_rows) == 7 and {r["r_format"] for r in t2_rows} == {0}
    assert sum(r["parsed"] for r in t2_rows) == 6


def test_a4_r_exit_from_record(work: Path) -> None:
    export(inputs(work))
    by_id = {t["trajectory_id"]: t for t in trajectories(work / "corpus")}
    t2 = by_id[T2]
    # the gate said end at t=5, the L1 loop went on to t=7 (and said end again there)
    assert t2["level"] == "L1"
    assert [t["t"] for t in t2["turns"] if t["exit_gate"]] == [5, 7]
    assert len(t2["turns"]) == 7
    assert t2["t_exit"] == 5 and t2["t_last_evidence"] == 5
    assert t2["r_exit"] == 0  # loop behaviour (stopped at 7) would score −0.5
    assert (by_id["demo/q1/s-beta/1"]["t_exit"], by_id["demo/q1/s-beta/1"]["r_exit"]) == (2, -0.75)
    assert (by_id["demo/q1/s-alpha/0"]["t_exit"], by_id["demo/q1/s-alpha/0"]["r_exit"]) == (4, -0.5)
    # no exit gate said end and the run ran out of chunks: the last turn
    t4 = by_id["demo/q2/s-alpha/0"]
    assert (t4["t_exit"], t4["t_last_evidence"], t4["r_exit"]) == (4, None, None)
    assert t4["r_exit_reason"] == "no_evidence"
    assert by_id[T2]["r_exit_reason"] is None


def test_a5_prompt_is_recorded_bytes(work: Path) -> None:
    export(inputs(work))
    log = {(r["trajectory_id"], r["t"]): r for r in log_lines(work)}
    chunks = {}
    for rec in read_jsonl(work / "chunks.jsonl", "chunk"):
        chunks[rec["session"], rec["index"] + 1] = render_records(rec["records"])
    builder = load_prompt_builder()
    questions = {
        "q1": "Which namespace do the metrics pods run in?",
        "q2": "Which database migration failed, and why?",
    }
    for traj in trajectories(work / "corpus"):
        for turn in traj["turns"]:
            rec = log[traj["trajectory_id"], turn["t"]]
            body = rec["request"]["body"]
            assert turn["prompt"] == json.loads(body)["messages"]
            # byte for byte: the exported messages serialise to the bytes inside the body
            assert f'"messages":{dumps(turn["prompt"])},' in body
            assert turn["request_sha256"] == sha256_text(body) == rec["request"]["sha256"]
            assert turn["response"] == rec["content"]
            # and not what the current template would assemble (the fixture was
            # recorded with an older one): re-assembly would be caught here
            rebuilt = builder.build(
                questions[traj["query_id"]],
                chunks[traj["session"], turn["t"]],
                rec["memory_before"],
            ).messages()
            assert rebuilt != turn["prompt"]
    rows = pq.read_table(work / "corpus" / TURNS).to_pylist()
    for row in rows:
        e = row["extra_info"]
        assert (
            row["prompt"]
            == json.loads(log[e["trajectory_id"], e["t"]]["request"]["body"])["messages"]
        )


def test_a5_corrupt_recording_fails(work: Path) -> None:
    def corrupt(i, rec):
        if i == 9:  # T2 t=5: one character of the body changes, its sha256 does not
            rec["request"]["body"] = rec["request"]["body"].replace("metrics", "metricz", 1)
        return rec

    rewrite_log(work, corrupt)
    with pytest.raises(RecordError) as e:
        export(inputs(work))
    assert e.value.path.endswith("log.jsonl") and e.value.line == 9
    assert e.value.field == "request.sha256"
    assert "re-assemble" in str(e.value)
    assert_nothing_written(work / "corpus")


def test_a6_r_outcome_null(work: Path) -> None:
    export(inputs(work))
    lines = (work / "corpus" / TRAJECTORIES).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5
    for line in lines:
        assert '"r_outcome":null' in line  # present, null: not omitted, not 0
        assert json.loads(line)["r_outcome"] is None
    extra = pq.read_table(work / "corpus" / TURNS).column("extra_info").combine_chunks()
    r_outcome = extra.field("r_outcome")
    assert r_outcome.null_count == len(r_outcome) == 24


def test_a7_refuses_without_calibration(work: Path) -> None:
    (work / "kappa.json").unlink()
    out = work / "corpus"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "grumem.cli",
            "export",
            "--turn-log",
            str(work / "log.jsonl"),
            "--labels",
            str(work / "labels.jsonl"),
            "--kappa",
            str(work / "kappa.json"),
            "--settings",
            '{"export": {"min_kappa": 0.6, "data_source": "demo"}}',
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "label a sample" in proc.stderr and str(work / "kappa.json") in proc.stderr
    assert "calibration" in proc.stderr
    assert not out.exists()


def test_a8_summary_counts(work: Path) -> None:
    summary = export(inputs(work))
    on_disk = json.loads((work / "corpus" / SUMMARY).read_text(encoding="utf-8"))
    assert on_disk == summary
    validate(summary, "summary")
    hand = {k: v for k, v in summary.items() if k != "inputs"}
    assert hand == {
        "trajectories": 5,
        "trajectories_in_log": 6,
        "levels": {"L1": 5, "L2": 0},
        "turns": 24,
        "r_update": {"positive": 19, "negative": 5},
        "r_format": {"pass": 4, "fail": 1, "pass_rate": 0.8},
        "r_exit": {
            "on_time": 1,
            "early": 1,
            "late": 1,
            "no_evidence": 1,
            "aborted": 1,
            "no_exit_gate": 0,
        },
        "t_last_evidence": {"1": 1, "2": 1, "5": 2},
        "no_evidence": 1,
        "aborted": {
            "trajectories": 2,
            "by_reason": {"budget": 1, "request_failed": 1},
            "without_turns": 1,
        },
        "parsed": {"turns": 23, "unparsed": 1, "rate": 23 / 24},
        "reasks": {"turns": 0, "asks": 0},
        # 4 groups; q1/s-beta has samples 0 and 1 (7 turns each), the others one
        # sample (4 + 4 + 2 turns); in q1/s-beta both samples have the same
        # r_update at t = 1, 2, 6, 7 and differ at t = 3, 4, 5
        "advantages": {
            "alpha": 0.9,
            "return_weights": {"r_update": 1.0, "r_exit": 1.0, "r_format": 1.0},
            "groups": 4,
            "turns_with_advantage": 6,
            "turns_without_advantage": 18,
            "null_traj": {"single_sample": 3, "zero_variance": 0},
            "null_turn": {"single_sample": 10, "zero_variance": 8},
        },
    }
    assert summary["inputs"]["kappa"] == pytest.approx(40 / 53)
    assert summary["inputs"]["t_last_evidence_over"] == "recorded turns"


# ------------------------------------------- refusals, bad inputs, deterministic bytes


def test_advantages_of_a_real_group(work: Path) -> None:
    """q1/s-beta, samples 0 and 1: R_0 = 3/7 + 0 (on time) + 0 (a turn unparsed),
    R_1 = 5/7 - 0.75 (early) + 1; two values normalise to -1 and +1."""
    export(inputs(work, alpha=0.5))
    by_id = _by_id(work / "corpus")
    s0, s1 = by_id[T2], by_id["demo/q1/s-beta/1"]
    assert [t["advantage_traj"] for t in s0["turns"]] == [pytest.approx(-1, rel=1e-5)] * 7
    assert [t["advantage_traj"] for t in s1["turns"]] == [pytest.approx(1, rel=1e-5)] * 7
    # r_update: s0 +1 +1 -1 -1 +1 +1 +1, s1 +1 +1 +1 +1 -1 +1 +1
    turn = [None, None, -1, -1, 1, None, None]
    for tr, sign in ((s0, 1), (s1, -1)):
        got = [t["advantage_turn"] for t in tr["turns"]]
        assert got == [None if v is None else pytest.approx(sign * v, rel=1e-5) for v in turn]
        for t in tr["turns"]:
            want = None if t["advantage_turn"] is None else (
                0.5 * t["advantage_traj"] + 0.5 * t["advantage_turn"])  # fmt: skip
            assert t["advantage"] == want
    # a group of one: null, never 0
    assert {t["advantage"] for t in by_id["demo/q1/s-alpha/0"]["turns"]} == {None}
    rows = pq.read_table(work / "corpus" / TURNS).to_pylist()
    turns = [t for tr in trajectories(work / "corpus") for t in tr["turns"]]
    for row, t in zip(rows, turns, strict=True):
        for name in ("advantage", "advantage_traj", "advantage_turn"):
            assert row["extra_info"][name] == t[name]


def test_trajectory_turn_weighting_reaches_the_corpus_and_the_rows(work: Path) -> None:
    """export.turn_weighting: trajectory. q1/s-beta's two samples read 7 turns each, so
    each weighs alike and the 14 turns pool: 11 x +1, 3 x -1, mean 4/7, std sqrt(33)/7;
    +1 -> 3/sqrt(33), -1 -> -11/sqrt(33) at every t (under `row` the t's where both
    samples agree are null). The sessions rows carry the setting to the group step."""
    from grumem.stages.export import SESSIONS

    export(sessions_inputs(work, alpha=0.5, turn_weighting="trajectory"))
    by_id = _by_id(work / "corpus")
    up, down = 3 / math.sqrt(33), -11 / math.sqrt(33)
    for tid in (T2, "demo/q1/s-beta/1"):
        for t in by_id[tid]["turns"]:
            want = up if t["r_update"] == 1 else down
            assert t["advantage_turn"] == pytest.approx(want, rel=1e-5)
            assert t["advantage"] == pytest.approx(0.5 * t["advantage_traj"] + 0.5 * want, rel=1e-5)
    # a group of one stays null under either rule
    assert {t["advantage"] for t in by_id["demo/q1/s-alpha/0"]["turns"]} == {None}
    rows = pq.read_table(work / "corpus" / SESSIONS).to_pylist()
    assert {r["extra_info"]["turn_weighting"] for r in rows} == {"trajectory"}


def test_cli_prints_summary(work: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "grumem.cli",
            "export",
            "--turn-log",
            str(work / "log.jsonl"),
            "--labels",
            str(work / "labels.jsonl"),
            "--kappa",
            str(work / "kappa.json"),
            "--settings",
            '{"export": {"min_kappa": 0.6, "data_source": "demo"}}',
            "--out-dir",
            str(work / "corpus"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "5 trajectories (6 in the log), 24 turns" in proc.stderr
    assert "r_update: +1 19, -1 5" in proc.stderr
    assert "pass rate 80.0%" in proc.stderr
    assert "t_last_evidence: t=1: 1, t=2: 1, t=5: 2" in proc.stderr
    assert "aborted trajectories: 2 (budget 1, request_failed 1" in proc.stderr
    assert pq.read_table(work / "corpus" / TURNS).column("data_source").to_pylist() == ["demo"] * 24


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


def test_kappa_below_threshold_refuses(work: Path) -> None:
    why = r"kappa 0\.7547 over 26 pairs .* below export.min_kappa 0\.8"
    with pytest.raises(ExportRefused, match=why):
        export(inputs(work, min_kappa=0.8))
    assert_nothing_written(work / "corpus")


def test_stale_kappa_refuses(work: Path) -> None:
    with open(work / "labels.jsonl", "a", encoding="utf-8") as f:
        f.write(
            dumps(
                {
                    "query_id": "q3",
                    "chunk_sha": "0" * 64,
                    "evidence": True,
                    "annotator": "late-edit",
                }
            )
            + "\n"
        )
    with pytest.raises(ExportRefused, match="stale calibration"):
        export(inputs(work))
    assert_nothing_written(work / "corpus")
    calibrate(work)  # rerunning kappa on the current labels lifts the refusal
    export(inputs(work))


def test_refusal_leaves_previous_dir_untouched(work: Path) -> None:
    export(inputs(work))
    before = {p.name: p.read_bytes() for p in (work / "corpus").iterdir()}
    (work / "kappa.json").unlink()
    with pytest.raises(ExportRefused, match="label a sample"):
        export(inputs(work))
    assert {p.name: p.read_bytes() for p in (work / "corpus").iterdir()} == before


def test_deterministic_bytes(work: Path) -> None:
    export(inputs(work, out="a"))
    export(inputs(work, out="b"))
    export(inputs(work, out="b"))  # over an existing corpus, too
    for name in (TRAJECTORIES, TURNS, SUMMARY, CARD):
        a, b = (work / "a" / name).read_bytes(), (work / "b" / name).read_bytes()
        assert a == b, name
    assert sorted(p.name for p in (work / "b").iterdir()) == sorted(
        [TRAJECTORIES, TURNS, SUMMARY, CARD]
    )


def test_parquet_has_verl_columns(work: Path) -> None:
    export(inputs(work, data_source="demo"))
    table = pq.read_table(work / "corpus" / TURNS)
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    schema = table.schema
    assert schema.field("data_source").type == pa.string()
    assert schema.field("ability").type == pa.string()
    assert schema.field("prompt").type == pa.list_(
        pa.struct([("role", pa.string()), ("content", pa.string())])
    )
    assert schema.field("reward_model").type == pa.struct(
        [("style", pa.string()), ("ground_truth", pa.string())]
    )
    extra = {f.name for f in schema.field("extra_info").type}
    assert {
        "index",
        "split",
        "trajectory_id",
        "t",
        "response",
        "r_update",
        "r_exit",
        "r_format",
        "r_outcome",
        "chunk_sha",
        "parsed",
        "update_gate",
        "exit_gate",
    } <= extra
    rows = table.to_pylist()
    turns = [(tr, t) for tr in trajectories(work / "corpus") for t in tr["turns"]]
    assert len(rows) == len(turns) == 24
    for i, (row, (traj, turn)) in enumerate(zip(rows, turns, strict=True)):
        e = row["extra_info"]
        assert row["data_source"] == "demo" and row["ability"] == "memory_gating"
        assert row["reward_model"] == {
            "style": "rule",
            "ground_truth": "yes" if turn["label"] else "no",
        }
        assert row["prompt"] == turn["prompt"]
        assert (e["index"], e["trajectory_id"], e["t"]) == (i, traj["trajectory_id"], turn["t"])
        assert (e["response"], e["r_update"], e["parsed"]) == (
            turn["response"],
            turn["r_update"],
            turn["parsed"],
        )
        assert (e["r_exit"], e["r_format"], e["r_outcome"]) == (
            traj["r_exit"],
            traj["r_format"],
            None,
        )


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
    summary = json.loads((work / "turns-only" / SUMMARY).read_text(encoding="utf-8"))
    assert summary["levels"] == {"L1": 4, "L2": 1}
    assert "pass --chunks" in format_summary(summary)
    summary = export(inputs(work, out="sessions", chunks=(str(work / "chunks.jsonl"),)))
    t3 = next(
        t for t in trajectories(work / "sessions") if t["trajectory_id"] == "demo/q1/s-beta/1"
    )
    assert (t3["t_exit"], t3["t_last_evidence"], t3["r_exit"]) == (2, 5, -0.75)
    assert summary["inputs"]["t_last_evidence_over"] == "session chunks"


def test_chunk_files_must_match_the_log(work: Path) -> None:
    lines = (work / "chunks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    rec = json.loads(lines[1])  # s-alpha t=2, re-chunked since the run
    rec["records"][0]["text"] += " (edited)"
    lines[1] = dumps(rec) + "\n"
    (work / "chunks.jsonl").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(RecordError, match="re-chunked"):
        export(inputs(work, chunks=(str(work / "chunks.jsonl"),)))
    assert_nothing_written(work / "corpus")


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


def test_no_trainable_turns_is_an_error(work: Path) -> None:
    rewrite_log(work, lambda i, r: r if r["trajectory_id"] == "demo/q1/s-gamma/0" else None)
    with pytest.raises(GrumemError, match="no trainable turns"):
        export(inputs(work))
    assert_nothing_written(work / "corpus")


# ---------------------------------------------------------------- a refused export writes nothing


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _drop_label(work: Path, query_id: str, t: int, session: str) -> None:
    """The judge could not parse its judgement of one pair: no label, in either file."""
    sha = next(
        r["chunk_sha"]
        for r in log_lines(work)
        if r["query_id"] == query_id and r["session"] == session and r["t"] == t
    )
    for name in ("labels.jsonl", "calibration.jsonl"):
        lines = (work / name).read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [x for x in lines if not (sha in x and f'"{query_id}"' in x)]
        assert len(kept) == len(lines) - 1
        (work / name).write_text("".join(kept), encoding="utf-8")
    calibrate(work)


def _break(work: Path, how: str):
    """Make the export refuse or fail in one way; return the fix."""
    if how == "no kappa file":
        (work / "kappa.json").unlink()
        return lambda: calibrate(work)
    if how == "kappa below min_kappa":
        return None  # the fix is the argument: see below
    if how == "stale kappa":
        text = (work / "labels.jsonl").read_text(encoding="utf-8")
        (work / "labels.jsonl").write_text(text.replace('"fixture-author"', '"edited"', 1))
        return lambda: calibrate(work)
    if how == "missing labels":
        saved = (work / "labels.jsonl").read_bytes()
        (work / "labels.jsonl").unlink()
        return lambda: (work / "labels.jsonl").write_bytes(saved)
    if how == "corrupted recording":
        saved = (work / "log.jsonl").read_bytes()
        rewrite_log(work, lambda i, r: {**r, "content": r["content"] + "!"} if i == 9 else r)
        return lambda: (work / "log.jsonl").write_bytes(saved)
    if how == "unparsed judgement":
        saved = {n: (work / n).read_bytes() for n in ("labels.jsonl", "calibration.jsonl")}
        _drop_label(work, "q1", 5, "s-beta")

        def fix() -> None:
            for n, data in saved.items():
                (work / n).write_bytes(data)
            calibrate(work)

        return fix
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "no kappa file",
        "kappa below min_kappa",
        "stale kappa",
        "missing labels",
        "corrupted recording",
        "unparsed judgement",
    ],
)
def test_refused_export_never_writes_its_inputs(work: Path, how: str, capsys) -> None:
    """`grumem export` refuses or fails; every input keeps its bytes (the
    error goes to stderr only) and the corrected rerun succeeds."""
    from grumem.cli import main

    fix = _break(work, how)
    inputs = [p for p in sorted(work.iterdir()) if p.is_file()]
    before = {p.name: _sha256(p) for p in inputs}
    args = [
        "export",
        "--turn-log",
        str(work / "log.jsonl"),
        "--labels",
        str(work / "labels.jsonl"),
        "--kappa",
        str(work / "kappa.json"),
        "--chunks",
        str(work / "chunks.jsonl"),
        "--out-dir",
        str(work / "corpus"),
    ]
    min_kappa = 0.8 if how == "kappa below min_kappa" else 0.6
    settings = ["--settings", json.dumps({"export": {"min_kappa": min_kappa}})]
    assert main([*args, *settings]) == 1
    assert "grumem export: error:" in capsys.readouterr().err
    assert {p.name: _sha256(p) for p in inputs if p.exists()} == before
    assert sorted(p for p in work.iterdir() if p.is_file()) == inputs  # nothing new beside them
    assert_nothing_written(work / "corpus")
    if fix is not None:
        fix()
    assert main([*args, "--settings", '{"export": {"min_kappa": 0.6}}']) == 0
    assert (work / "corpus" / SUMMARY).exists()


@pytest.mark.parametrize("command", ["responses", "judge"])
def test_progress_log_cannot_be_an_input(tmp_path: Path, command: str, capsys) -> None:
    """`--log` is a progress log only; naming an input there is refused
    before anything runs, and the input keeps its bytes."""
    from grumem.cli import main

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"not": "a prompt"}\n', encoding="utf-8")
    before = prompts.read_bytes()
    if command == "responses":
        args = ["responses", "--settings", "{}", "--prompts", str(prompts)]
        args += ["--out", str(tmp_path / "out.jsonl")]
    else:
        args = ["judge", "--settings", "{}", "--project", "p", "--queries", str(prompts)]
        args += ["--out", str(tmp_path / "l.jsonl"), "--unparsed", str(tmp_path / "u.jsonl")]
    tail = [str(prompts)] if command == "judge" else []
    assert main([*args, "--log", str(prompts), *tail]) == 1
    err = capsys.readouterr().err
    assert f"--log {prompts} is also" in err and "a file of its own" in err
    assert prompts.read_bytes() == before
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "l.jsonl").exists()


def test_min_kappa_cannot_switch_the_gate_off(work: Path) -> None:
    """export.min_kappa has a minimum of 0 in the schema, and the export refuses a
    negative threshold passed to it."""
    from grumem.config.settings import validate_config

    project = {"p": {"chunks": "c/*.jsonl", "queries": "q.yaml"}}
    with pytest.raises(RecordError) as e:
        validate_config({"projects": project, "export": {"min_kappa": -1}})
    assert e.value.field == "export.min_kappa"
    assert validate_config({"projects": project})["export"]["min_kappa"] == 0.6
    description = _min_kappa_schema()["description"]
    assert "refused" in description and "kappa" in description
    with pytest.raises(ExportRefused, match="min_kappa -1"):
        export(inputs(work, min_kappa=-1))
    assert_nothing_written(work / "corpus")


def _min_kappa_schema() -> dict:
    from grumem.io.jsonl import schema

    return schema("config")["properties"]["export"]["properties"]["min_kappa"]


def _by_id(out: Path) -> dict[str, dict]:
    return {t["trajectory_id"]: t for t in trajectories(out)}


def test_aborted_trajectory_has_no_r_exit(work: Path) -> None:
    """T5 was stopped by the budget at t=3 with no recorded end: where the loop
    stopped is no decision of the model, so r_exit is null with its reason (not
    −0.5 late, as if it had exited at t=2). Counted apart."""
    summary = export(inputs(work))
    t5 = _by_id(work / "corpus")["demo/q2/s-beta/0"]
    assert t5["aborted"]["reason"] == "budget"
    assert t5["t_last_evidence"] == 1
    assert (t5["r_exit"], t5["r_exit_reason"], t5["t_exit"]) == (None, "aborted", None)
    assert summary["r_exit"]["aborted"] == 1 and summary["r_exit"]["late"] == 1
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
    t3 = _by_id(work / "corpus")["demo/q1/s-beta/1"]
    assert [t["t"] for t in t3["turns"]] == [1] and t3["turns"][0]["exit_gate"] is False
    assert t3["aborted"]["reason"] == "request_failed" and t3["t_last_evidence"] == 5
    assert (t3["r_exit"], t3["r_exit_reason"], t3["t_exit"]) == (None, "aborted", None)
    assert summary["r_exit"]["early"] == 0 and summary["r_exit"]["aborted"] == 2


def test_ran_out_of_chunks_keeps_the_last_turn(work: Path) -> None:
    """No `end` recorded, not aborted: t_exit is the last chunk."""

    def no_end(i, rec):
        if rec["trajectory_id"] == "demo/q1/s-alpha/0" and rec["exit_gate"]:
            return {**rec, "exit_gate": False}
        return rec

    rewrite_log(work, no_end)
    t1 = _by_id(_exported(work))["demo/q1/s-alpha/0"]
    assert (t1["t_exit"], t1["t_last_evidence"], t1["r_exit"], t1["r_exit_reason"]) == (
        4,
        2,
        -0.5,
        None,
    )


def _exported(work: Path) -> Path:
    export(inputs(work))
    return work / "corpus"


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
    t1 = _by_id(work / "corpus")["demo/q1/s-alpha/0"]
    assert t1["t_last_evidence"] == 2 and t1["r_format"] == 0
    assert (t1["r_exit"], t1["r_exit_reason"], t1["t_exit"]) == (None, "no_exit_gate", None)
    assert summary["r_exit"]["no_exit_gate"] == 1


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
    t1 = _by_id(work / "corpus")["demo/q1/s-alpha/0"]
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
    assert summary["reasks"] == {"turns": 1, "asks": 1}
    assert summary["r_format"]["pass"] == 3
    # the earlier ask's text is checked against its body like the last one's
    rewrite_log(
        work,
        lambda i, r: {**r, "earlier_asks": [{**earlier, "content": "edited"}]} if i == 2 else r,
    )
    with pytest.raises(RecordError) as e:
        export(inputs(work, out="again"))
    assert (e.value.line, e.value.field) == (2, "earlier_asks.0.content")


@pytest.mark.parametrize("limit", ["ROW_GROUP_ROWS", "ROW_GROUP_BYTES"])
def test_row_groups_hold_the_rows_in_order(work: Path, monkeypatch, limit: str) -> None:
    """The columnar sink cuts a row group at the row that reaches ROW_GROUP_ROWS or
    ROW_GROUP_BYTES (mid-trajectory too), and the file holds exactly the rows
    verl_rows gives, in order."""
    from grumem.corpus import turn_rows

    monkeypatch.setattr(turn_rows, limit, 5 if limit == "ROW_GROUP_ROWS" else 12_000)
    export(inputs(work))
    rows, sizes = [], []
    for record in trajectories(work / "corpus"):
        for row, size in verl_rows("grumem", "memory_gating", record, len(rows)):
            rows.append(row)
            sizes.append(size)
    expected_groups, n, b = [], 0, 0
    for size in sizes:
        n, b = n + 1, b + size
        if n >= turn_rows.ROW_GROUP_ROWS or b >= turn_rows.ROW_GROUP_BYTES:
            expected_groups.append(n)
            n, b = 0, 0
    expected_groups += [n] if n else []
    f = pq.ParquetFile(work / "corpus" / TURNS)
    groups = [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)]
    assert groups == expected_groups and len(groups) > 2
    assert f.read().to_pylist() == rows
    assert f.read().equals(pa.Table.from_pylist(rows, schema=turn_rows.PARQUET_SCHEMA))


def test_advantage_table_fills_in_scoring_order_only(work: Path) -> None:
    """The table is keyed by a trajectory's place among the exported ones (no id kept
    per trajectory): a record met out of that order is an error, never another's
    advantages."""
    from grumem.core.advantages import ALPHA
    from grumem.corpus.advantage_table import AdvantageTable, Scores

    export(inputs(work))
    records = trajectories(work / "corpus")
    scores = Scores()
    for r in records:
        scores.add(r)
    table = AdvantageTable(scores, ALPHA, EQUAL_WEIGHTS)
    first = json.loads(json.dumps(records[0]))
    table.fill(first)
    assert first == records[0]  # the same advantages again
    with pytest.raises(GrumemError, match="not the one the export's first pass scored"):
        table.fill(records[2])


# ---------------------------------------------------------------- sessions.parquet


def sessions_inputs(work: Path, out: str = "corpus", **kw):
    """The export given what sessions.parquet needs: the queries, chunks and project."""
    return inputs(
        work,
        out,
        chunks=(str(work / "chunks.jsonl"),),
        queries=str(FIXTURE / "queries.yaml"),
        project="demo",
        **kw,
    )


def test_sessions_rows_hold_every_session_its_chunks_and_labels(work: Path) -> None:
    from grumem.core.template import Budget
    from grumem.corpus.rollout_rows import SESSIONS_SCHEMA
    from grumem.io.chunk_files import read_chunk_file
    from grumem.io.labels import load_labels
    from grumem.io.template_files import GRU_MEM_TEMPLATE
    from grumem.stages.export import SESSIONS
    from grumem.verl.rollout import read_rollout_row

    export(sessions_inputs(work, level="L2", budget=Budget(section=4000), system="be brief"))
    table = pq.read_table(work / "corpus" / SESSIONS)
    assert table.schema == SESSIONS_SCHEMA
    rows = table.to_pylist()
    # 3 sessions x 2 queries, sorted by (session, query_id): q2/s-gamma has no
    # trajectory in the log (and q1/s-gamma's aborted before its first turn), yet
    # every (query, session) of the project is a row
    keys = [(r["extra_info"]["session"], r["extra_info"]["query_id"]) for r in rows]
    assert keys == [(s, q) for s in ("s-alpha", "s-beta", "s-gamma") for q in ("q1", "q2")]
    chunks: dict[str, list] = {}
    for c in read_chunk_file(work / "chunks.jsonl"):
        chunks.setdefault(c.session, []).append(c)
    labels = load_labels(work / "labels.jsonl")
    questions = {"q1": "Which namespace do the metrics pods run in?"}
    questions["q2"] = "Which database migration failed, and why?"
    for i, row in enumerate(rows):
        validate(row, "rollout-row")
        info = row["extra_info"]
        session = chunks[info["session"]]
        assert info["index"] == i and info["project"] == "demo" and info["split"] == "train"
        assert [c["text"] for c in info["chunks"]] == [render_records(c.records) for c in session]
        assert [c["chunk_sha"] for c in info["chunks"]] == [c.sha for c in session]
        want = [labels.get(info["query_id"], c.sha) for c in session]
        assert row["reward_model"] == {
            "style": "rule",
            "ground_truth": ["yes" if v else "no" for v in want],
        }
        evidence = [t for t, v in enumerate(want, start=1) if v]
        assert info["t_last_evidence"] == (max(evidence) if evidence else None)
        assert row["prompt"] == [{"role": "user", "content": questions[info["query_id"]]}]
        assert info["question"] == questions[info["query_id"]]
        assert (row["data_source"], row["agent_name"], row["ability"]) == (
            "grumem",
            "grumem",
            "memory_gating",
        )
        assert (info["level"], info["system"], info["budget"]["section"]) == (
            "L2",
            "be brief",
            4000,
        )
        assert info["template_sha256"] == sha256_text(GRU_MEM_TEMPLATE.read_text(encoding="utf-8"))
        assert (info["alpha"], info["return_weights"], info["turn_weighting"]) == (
            0.9,
            {"r_update": 1.0, "r_exit": 1.0, "r_format": 1.0},
            "row",
        )
        assert read_rollout_row(row).chunks[-1].t == len(session)
    # the hand count of fixtures/export/README.md: q1/s-beta's evidence at 2 and 5
    (beta,) = [
        r
        for r in rows
        if r["extra_info"]["session"] == "s-beta" and r["extra_info"]["query_id"] == "q1"
    ]
    assert beta["extra_info"]["t_last_evidence"] == 5


def _without_label(work: Path, query_id: str, session: str, t: int) -> str:
    """Drop the label of one chunk of the chunk file (and its calibration pair)."""
    from grumem.io.chunk_files import read_chunk_file

    (sha,) = [
        c.sha for c in read_chunk_file(work / "chunks.jsonl") if (c.session, c.t) == (session, t)
    ]
    for name in ("labels.jsonl", "calibration.jsonl"):
        lines = (work / name).read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [x for x in lines if not (sha in x and f'"{query_id}"' in x)]
        assert len(kept) == len(lines) - 1
        (work / name).write_text("".join(kept), encoding="utf-8")
    calibrate(work)
    return sha


@pytest.mark.parametrize(
    "how", ["no kappa file", "kappa below min_kappa", "a chunk without a label"]
)
def test_a_refused_export_writes_no_sessions_file(work: Path, how: str) -> None:
    """The κ gate and the labels refuse sessions.parquet as they refuse the rest: nothing
    is written, and an earlier corpus is left as it was."""
    export(sessions_inputs(work, out="before"))
    before = {p.name: p.read_bytes() for p in (work / "before").iterdir()}
    assert "sessions.parquet" in before
    min_kappa = 0.6
    if how == "no kappa file":
        (work / "kappa.json").unlink()
        error, match = ExportRefused, "label a sample"
    elif how == "kappa below min_kappa":
        min_kappa, error, match = 0.8, ExportRefused, "below export.min_kappa 0.8"
    else:
        # q2/s-gamma t=2: no trajectory of the log visits it, only its sessions row needs it
        sha = _without_label(work, "q2", "s-gamma", 2)
        error, match = MissingLabelsError, r"1 session chunk\(s\) of sessions.parquet have no label"
        with pytest.raises(error, match=rf"demo/q2/s-gamma t=2 \(query 'q2', chunk {sha[:12]}…\)"):
            export(sessions_inputs(work, out="before"))
        # the turns alone do not need it: the turn-level export still goes through
        export(inputs(work, out="turns-only", chunks=(str(work / "chunks.jsonl"),)))
    with pytest.raises(error, match=match):
        export(sessions_inputs(work, min_kappa=min_kappa))
    assert_nothing_written(work / "corpus")
    with pytest.raises(error, match=match):
        export(sessions_inputs(work, out="before", min_kappa=min_kappa))
    assert {p.name: p.read_bytes() for p in (work / "before").iterdir()} == before


def test_sessions_need_the_chunk_files_and_the_project(work: Path) -> None:
    with pytest.raises(GrumemError, match="give --chunks and --project too"):
        export(inputs(work, queries=str(FIXTURE / "queries.yaml"), project="demo"))
    with pytest.raises(GrumemError, match="give --chunks and --project too"):
        export(
            inputs(
                work, queries=str(FIXTURE / "queries.yaml"), chunks=(str(work / "chunks.jsonl"),)
            )
        )
    assert_nothing_written(work / "corpus")


def test_sessions_bytes_are_deterministic(work: Path) -> None:
    from grumem.stages.export import SESSIONS

    export(sessions_inputs(work, out="a"))
    export(sessions_inputs(work, out="b"))
    export(sessions_inputs(work, out="b"))
    assert (work / "a" / SESSIONS).read_bytes() == (work / "b" / SESSIONS).read_bytes()
    # the order of the chunk files and of the queries moves no row
    lines = (work / "chunks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (work / "gamma.jsonl").write_text("".join(lines[11:]), encoding="utf-8")
    (work / "alpha-beta.jsonl").write_text("".join(lines[:11]), encoding="utf-8")
    queries = yaml.safe_load((FIXTURE / "queries.yaml").read_text(encoding="utf-8"))
    queries["queries"].reverse()
    (work / "queries.yaml").write_text(yaml.safe_dump(queries), encoding="utf-8")
    export(
        inputs(
            work,
            out="c",
            chunks=(str(work / "gamma.jsonl"), str(work / "alpha-beta.jsonl")),
            queries=str(work / "queries.yaml"),
            project="demo",
        )
    )
    assert (work / "c" / SESSIONS).read_bytes() == (work / "a" / SESSIONS).read_bytes()


def test_cli_writes_sessions_with_the_runs_settings(work: Path) -> None:
    from grumem.cli import main
    from grumem.stages.export import SESSIONS

    settings = {"export": {"min_kappa": 0.6}, "loop": {"level": "L2"}, "llm": {"system": "s"}}
    settings["budget"] = {"memory": 512}
    args = ["export", "--turn-log", str(work / "log.jsonl"), "--labels", str(work / "labels.jsonl")]
    args += ["--kappa", str(work / "kappa.json"), "--chunks", str(work / "chunks.jsonl")]
    args += ["--queries", str(FIXTURE / "queries.yaml"), "--project", "demo"]
    args += ["--settings", json.dumps(settings), "--out-dir", str(work / "corpus")]
    assert main(args) == 0
    info = [r["extra_info"] for r in pq.read_table(work / "corpus" / SESSIONS).to_pylist()]
    assert len(info) == 6
    assert {(i["level"], i["system"], i["budget"]["memory"], i["project"]) for i in info} == {
        ("L2", "s", 512, "demo")
    }
