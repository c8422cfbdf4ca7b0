"""The bundled demo project: chunk files, standing questions, labels, calibration.

The demo is what `config.yaml` runs by default and what the kappa and export
stages are first exercised on, so its files must be valid, complete, small
enough for the embedded 135M model, and reproducible from
scripts/make_demo_labels.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from grumem.config.settings import load_queries
from grumem.core.chunk_text import Chunk, render_records
from grumem.io.chunk_files import read_chunk_file
from grumem.io.jsonl import read_jsonl
from grumem.io.tokenizer import cl100k_tokens
from support.checkout import FIXTURES_DIR, REPO_ROOT

TOKENS = cl100k_tokens()

DEMO = FIXTURES_DIR / "demo"
CHUNK_FILES = sorted((DEMO / "chunks").glob("*.jsonl"))
MAX_CHUNK_TOKENS = 600


def all_chunks() -> list[Chunk]:
    return [c for path in CHUNK_FILES for c in read_chunk_file(path)]


def queries() -> list[dict[str, str]]:
    return load_queries(DEMO / "queries.yaml")


def labels(name: str) -> list[dict]:
    return list(read_jsonl(DEMO / name, "label"))


def cohen_kappa(pairs: list[tuple[bool, bool]]) -> tuple[float, float, float]:
    """(kappa, observed agreement, expected agreement) of two binary raters."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    yes_a = sum(a for a, _ in pairs) / n
    yes_b = sum(b for _, b in pairs) / n
    expected = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    return (observed - expected) / (1 - expected), observed, expected


def test_five_sessions_one_file_each_with_3_to_12_chunks():
    assert len(CHUNK_FILES) == 5
    for path in CHUNK_FILES:
        chunks = read_chunk_file(path)
        assert {c.session for c in chunks} == {path.stem}
        assert 3 <= len(chunks) <= 12, path.name
        assert all(2 <= len(c.records) <= 6 for c in chunks), path.name


def test_all_four_roles_and_non_ascii_occur():
    roles = Counter(r["role"] for c in all_chunks() for r in c.records)
    assert set(roles) == {"user", "assistant", "tool_result", "system"}
    assert any(not c.text.isascii() for c in all_chunks())


def test_every_chunk_fits_the_small_model():
    sizes = {(c.session, c.index): TOKENS.count(render_records(c.records)) for c in all_chunks()}
    too_big = {k: n for k, n in sizes.items() if n > MAX_CHUNK_TOKENS}
    assert not too_big


def test_queries_two_standing_questions():
    qs = queries()
    assert len(qs) == 2
    assert len({q["id"] for q in qs}) == 2


def test_labels_cover_every_query_and_chunk_exactly_once():
    chunks = all_chunks()
    expected = {(q["id"], c.sha) for q in queries() for c in chunks}
    assert len(expected) == len(queries()) * len(chunks)  # no two chunks render alike
    rows = labels("labels.jsonl")
    got = [(r["query_id"], r["chunk_sha"]) for r in rows]
    assert len(got) == len(set(got))
    assert set(got) == expected
    assert {r["annotator"] for r in rows} == {"demo-author"}


def test_labels_are_mixed_per_query_and_session():
    by_sha = {c.sha: c.session for c in all_chunks()}
    first, second = (q["id"] for q in queries())
    sessions = set(by_sha.values())
    evidence: dict[str, set[str]] = {first: set(), second: set()}
    for r in labels("labels.jsonl"):
        if r["evidence"]:
            evidence[r["query_id"]].add(by_sha[r["chunk_sha"]])
    assert evidence[first] == sessions  # every session answers the first question
    assert 1 <= len(sessions - evidence[second]) < len(sessions)
    values = Counter((r["query_id"], r["evidence"]) for r in labels("labels.jsonl"))
    assert all(values[(q, v)] > 0 for q in (first, second) for v in (True, False))


def test_labels_sorted_by_query_then_session_and_index():
    where = {c.sha: (c.session, c.index) for c in all_chunks()}
    for name in ("labels.jsonl", "calibration.jsonl"):
        keys = [(r["query_id"], *where[r["chunk_sha"]]) for r in labels(name)]
        assert keys == sorted(keys), name


def test_calibration_kappa_between_point_six_and_one():
    primary = {(r["query_id"], r["chunk_sha"]): r["evidence"] for r in labels("labels.jsonl")}
    calibration = labels("calibration.jsonl")
    assert len(calibration) == 24
    assert {r["annotator"] for r in calibration} == {"demo-calibrator"}
    keys = [(r["query_id"], r["chunk_sha"]) for r in calibration]
    assert len(set(keys)) == len(keys)
    assert set(keys) <= primary.keys()
    assert {q for q, _ in keys} == {q["id"] for q in queries()}
    by_sha = {c.sha: c.session for c in all_chunks()}
    assert {by_sha[sha] for _, sha in keys} == set(by_sha.values())

    pairs = [(primary[k], r["evidence"]) for k, r in zip(keys, calibration, strict=True)]
    kappa, observed, expected = cohen_kappa(pairs)
    print(
        f"demo calibration: n={len(pairs)} p_o={observed:.4f} p_e={expected:.4f} kappa={kappa:.4f}"
    )
    assert 2 <= sum(a != b for a, b in pairs) <= 3
    assert expected < 1
    assert 0.6 < kappa < 1.0


def test_cohen_kappa_known_values():
    # perfect agreement; agreement at chance level; one worked 2x2 table
    assert cohen_kappa([(True, True), (False, False)])[0] == 1.0
    assert cohen_kappa([(True, True), (True, False), (False, True), (False, False)])[0] == 0.0
    table = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    assert cohen_kappa(table)[0] == pytest.approx(0.4)


def test_make_demo_labels_reproduces_committed_files(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "make_demo_labels.py"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("labels.jsonl", "calibration.jsonl"):
        assert (tmp_path / name).read_bytes() == (DEMO / name).read_bytes(), name
