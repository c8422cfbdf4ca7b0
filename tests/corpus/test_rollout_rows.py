"""sessions.parquet (grumem.corpus.rollout_rows): one row per (query, session) with its
chunks and labels, refused with the rest of the export, the same bytes every time."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from grumem.core.chunk_text import render_records
from grumem.core.json_text import sha256_text
from grumem.errors import ExportRefused, MissingLabelsError
from grumem.io.jsonl import validate
from grumem.stages.export import export
from support.export import FIXTURE, assert_nothing_written, drop_label, inputs, sessions_inputs

# the fixture's sessions under the default split (train 0.8, val 0.1, test 0.1, seed 0):
# u = the first 8 bytes of sha256("0:<session>") / 2**64 is 0.998, 0.517, 0.958
DEFAULT_SPLITS = {"s-alpha": "test", "s-beta": "train", "s-gamma": "test"}


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
        assert info["index"] == i and info["project"] == "demo"
        assert info["split"] == DEFAULT_SPLITS[info["session"]]
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
    drop_label(work, query_id, sha)
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
        error, match = ExportRefused, "no calibration"
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
