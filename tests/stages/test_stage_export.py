"""The `export` stage: its acceptance cases a1-a8 under their names, then refusals that
write nothing and leave the inputs as they were, the same bytes every time, and the
arguments sessions.parquet needs. Each part of the export has its own tests
(tests/corpus/test_<module>.py).

The fixture is fixtures/export/ (see its README for the hand count the
assertions below repeat).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grumem.core.chunk_text import render_records
from grumem.core.json_text import dumps, sha256_text
from grumem.core.split import SPLITS, Split, split_file
from grumem.corpus.card import CARD
from grumem.errors import ExportRefused, GrumemError, RecordError
from grumem.io.jsonl import read_jsonl, validate
from grumem.io.template_files import load_prompt_builder
from grumem.stages.export import SUMMARY, TRAJECTORIES, TURNS, export
from support.export import (
    FIXTURE,
    T2,
    assert_nothing_written,
    calibrate,
    drop_label,
    export_command,
    inputs,
    log_lines,
    rewrite_log,
    sessions_inputs,
    trajectories,
)

# ---------------------------------------------------------------- a1-a8


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
    proc = export_command(work, out)
    assert proc.returncode != 0
    # it names the missing file and the step that makes it (the labels' calibration)
    assert "no calibration" in proc.stderr and str(work / "kappa.json") in proc.stderr
    assert "run rule `kappa`" in proc.stderr and "calibrate-sample" in proc.stderr
    assert not out.exists()


def test_a8_summary_counts(work: Path) -> None:
    summary = export(inputs(work)).to_dict()
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


# ------------------------------------------------- refusals, deterministic bytes


def test_refusal_leaves_previous_dir_untouched(work: Path) -> None:
    export(inputs(work))
    before = {p.name: p.read_bytes() for p in (work / "corpus").iterdir()}
    (work / "kappa.json").unlink()
    with pytest.raises(ExportRefused, match="no calibration"):
        export(inputs(work))
    assert {p.name: p.read_bytes() for p in (work / "corpus").iterdir()} == before


def test_deterministic_bytes(work: Path) -> None:
    export(inputs(work, out="a"))
    export(inputs(work, out="b"))
    export(inputs(work, out="b"))  # over an existing corpus, too
    names = [TRAJECTORIES, TURNS, *(split_file(TURNS, s) for s in SPLITS), SUMMARY, CARD]
    for name in names:
        a, b = (work / "a" / name).read_bytes(), (work / "b" / name).read_bytes()
        assert a == b, name
    assert sorted(p.name for p in (work / "b").iterdir()) == sorted(names)


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
    drop_label(work, query_id, sha)


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


# ---------------------------------------------------------------- sessions.parquet


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


def test_cli_writes_sessions_with_the_runs_settings(work: Path) -> None:
    from grumem.cli import main
    from grumem.stages.export import SESSIONS

    settings = {"export": {"min_kappa": 0.6}, "loop": {"level": "L2"}, "llm": {"system": "s"}}
    settings["budget"] = {"memory": 512}
    settings["split"] = {"train": 0.4, "val": 0.3, "test": 0.3, "seed": 7}
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
    assert {i["session"]: i["split"] for i in info} == SEED_7_SPLITS


# ---------------------------------------------------------------- the split

# train 0.4, val 0.3, test 0.3 under seed 7: u = 0.346, 0.822, 0.582 (sha256("7:<session>"))
SEED_7 = Split(train=0.4, val=0.3, test=0.3, seed=7)
SEED_7_SPLITS = {"s-alpha": "train", "s-beta": "test", "s-gamma": "val"}


def test_every_row_carries_its_sessions_split_and_each_split_is_a_file(work: Path) -> None:
    """trajectories.jsonl, turns.parquet and sessions.parquet name each row's split; the
    split files hold exactly the rows of their split, as they are in the file of all."""
    from grumem.corpus.rollout_rows import SESSIONS_SCHEMA
    from grumem.corpus.turn_rows import PARQUET_SCHEMA
    from grumem.stages.export import SESSIONS

    export(sessions_inputs(work, split=SEED_7))
    out = work / "corpus"
    records = trajectories(out)
    assert {r["session"]: r["split"] for r in records} == {"s-alpha": "train", "s-beta": "test"}
    for name, schema in ((TURNS, PARQUET_SCHEMA), (SESSIONS, SESSIONS_SCHEMA)):
        every = pq.read_table(out / name).to_pylist()
        for row in every:
            assert row["extra_info"]["split"] == SEED_7_SPLITS[row["extra_info"]["session"]]
        for split in SPLITS:
            table = pq.read_table(out / split_file(name, split))
            assert table.schema == schema
            assert table.to_pylist() == [r for r in every if r["extra_info"]["split"] == split]
    sessions = {
        s: sorted({r["extra_info"]["session"] for r in pq.read_table(out / f).to_pylist()})
        for s, f in ((s, split_file(SESSIONS, s)) for s in SPLITS)
    }
    assert sessions == {"train": ["s-alpha"], "val": ["s-gamma"], "test": ["s-beta"]}
    # s-gamma has no trajectory in the log: the val turns file is a file of no rows
    assert pq.read_table(out / split_file(TURNS, "val")).num_rows == 0
    assert pq.read_table(out / split_file(TURNS, "train")).num_rows == sum(
        len(r["turns"]) for r in records if r["session"] == "s-alpha"
    )


def test_an_empty_split_is_a_valid_file_of_no_rows(work: Path) -> None:
    from grumem.corpus.rollout_rows import SESSIONS_SCHEMA
    from grumem.stages.export import SESSIONS

    export(sessions_inputs(work))  # the default split puts no session of three in val
    for name in (TURNS, SESSIONS):
        f = pq.ParquetFile(work / "corpus" / split_file(name, "val"))
        assert f.metadata.num_rows == 0
    assert pq.read_schema(work / "corpus" / split_file(SESSIONS, "val")) == SESSIONS_SCHEMA
    card = (work / "corpus" / CARD).read_text(encoding="utf-8")
    assert (
        "| `val` (`validation`) | `turns-val.parquet`, `sessions-val.parquet` | 0 | 0 | 0 | 0 |"
        in card
    )


def _add_session(work: Path, session: str, texts: list[str]) -> None:
    """A session of one-record chunks added to the chunk file, labelled (no evidence)."""
    from grumem.io.chunk_files import read_chunk_file

    with open(work / "chunks.jsonl", "a", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(
                dumps({"session": session, "index": i, "records": [{"role": "user", "text": text}]})
            )
            f.write("\n")
    added = [c for c in read_chunk_file(work / "chunks.jsonl") if c.session == session]
    with open(work / "labels.jsonl", "a", encoding="utf-8") as f:
        for c in added:
            for q in ("q1", "q2"):
                f.write(
                    dumps({"query_id": q, "chunk_sha": c.sha, "evidence": False, "annotator": "t"})
                )
                f.write("\n")
    calibrate(work)


def test_adding_sessions_moves_no_session_to_another_split(work: Path) -> None:
    from grumem.stages.export import SESSIONS

    def splits(out: str) -> dict[str, str]:
        rows = pq.read_table(work / out / SESSIONS).to_pylist()
        return {r["extra_info"]["session"]: r["extra_info"]["split"] for r in rows}

    export(sessions_inputs(work, out="before", split=SEED_7))
    for n in range(12):
        _add_session(work, f"s-new-{n}", [f"new session {n}, chunk {t}" for t in range(2)])
    export(sessions_inputs(work, out="after", split=SEED_7))
    before, after = splits("before"), splits("after")
    assert before == SEED_7_SPLITS
    assert {s: after[s] for s in before} == before
    assert len(after) == 15 and set(after.values()) == set(SPLITS)
    # the trajectories of the log are where they were, in every file
    assert (work / "before" / TRAJECTORIES).read_bytes() == (
        work / "after" / TRAJECTORIES
    ).read_bytes()
    for split in SPLITS:
        name = split_file(TURNS, split)
        assert pq.read_table(work / "before" / name).equals(pq.read_table(work / "after" / name))
