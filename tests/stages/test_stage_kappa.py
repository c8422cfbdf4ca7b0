"""Stage `kappa` (M5.2): kappa.json from the labels and an independent calibration, and
its refusals: a calibration of the labels themselves, of another project, too small."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grumem.core.json_text import dumps
from grumem.errors import KappaError, RecordError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import sha256_file, validate
from grumem.stages.kappa import run_kappa
from support.checkout import FIXTURES_DIR
from support.kappa import kappa_2x2

FIXTURE = FIXTURES_DIR / "export"
DEMO = FIXTURES_DIR / "demo"
PROJECT = {"queries_path": FIXTURE / "queries.yaml", "chunk_paths": [FIXTURE / "chunks.jsonl"]}


def test_fixture_kappa_file(tmp_path: Path) -> None:
    out = tmp_path / "kappa.json"
    labels, calib = str(FIXTURE / "labels.jsonl"), str(FIXTURE / "calibration.jsonl")
    record = run_kappa(labels, calib, 20, str(out), **PROJECT)
    on_disk = json.loads(out.read_text(encoding="utf-8"))
    assert on_disk == record
    validate(on_disk, "kappa")
    assert on_disk["confusion"] == {"yes_yes": 4, "yes_no": 0, "no_yes": 2, "no_no": 20}
    assert on_disk["n"] == 26
    assert on_disk["kappa"] == pytest.approx(kappa_2x2(4, 0, 2, 20)) == pytest.approx(40 / 53)
    assert on_disk["labels_sha256"] == sha256_file(labels)
    assert on_disk["calibration_sha256"] == sha256_file(calib)
    assert (on_disk["labels_path"], on_disk["calibration_path"]) == (labels, calib)
    first = out.read_bytes()
    run_kappa(labels, calib, 20, str(out), **PROJECT)
    assert out.read_bytes() == first  # no timestamps


def test_cli(tmp_path: Path) -> None:
    out = tmp_path / "kappa.json"
    cmd = [
        sys.executable,
        "-m",
        "grumem.cli",
        "kappa",
        "--labels",
        str(FIXTURE / "labels.jsonl"),
        "--calibration",
        str(FIXTURE / "calibration.jsonl"),
        "--queries",
        str(FIXTURE / "queries.yaml"),
        "--chunks",
        str(FIXTURE / "chunks.jsonl"),
        "--settings",
        '{"export": {"min_calibration": 20}}',
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "kappa: 0.7547 over 26 pairs" in proc.stderr
    assert out.exists()
    out.unlink()
    cmd[cmd.index("--settings") + 1] = '{"export": {"min_calibration": 27}}'
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "only 26 pair(s)" in proc.stderr and "min_calibration" in proc.stderr
    assert not out.exists()


def label_lines(pairs, annotator: str, evidence=lambda i: False) -> str:
    return "".join(
        dumps({"query_id": q, "chunk_sha": sha, "evidence": evidence(i), "annotator": annotator})
        + "\n"
        for i, (q, sha) in enumerate(pairs)
    )


def files(tmp_path: Path, labels: str, calibration: str, out: str, n: int = 1) -> tuple:
    """run_kappa's positional arguments for files under tmp_path."""
    return str(tmp_path / labels), str(tmp_path / calibration), n, str(tmp_path / out)


def fixture_pairs() -> list[tuple[str, str]]:
    shas = [c.sha for _, cs in iter_sessions([FIXTURE / "chunks.jsonl"]) for c in cs]
    return [(q, sha) for q in ("q1", "q2") for sha in shas]


def test_degenerate_file_writes_nothing(tmp_path: Path) -> None:
    pairs = fixture_pairs()
    (tmp_path / "l.jsonl").write_text(label_lines(pairs, "x"), encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(label_lines(pairs, "y"), encoding="utf-8")
    with pytest.raises(KappaError, match="expected agreement is 1"):
        run_kappa(
            str(tmp_path / "l.jsonl"),
            str(tmp_path / "c.jsonl"),
            20,
            str(tmp_path / "kappa.json"),
            **PROJECT,
        )
    assert not (tmp_path / "kappa.json").exists()


# ------------------------------------------------------------------ the calibration is independent
# and of this project


def kappa_cli(tmp_path: Path, labels: Path, calibration: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "grumem", "kappa", "--labels", str(labels)]
    cmd += ["--calibration", str(calibration), "--queries", str(FIXTURE / "queries.yaml")]
    cmd += ["--chunks", str(FIXTURE / "chunks.jsonl"), "--out", str(tmp_path / "kappa.json")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_invented_pairs_in_both_files_are_refused_naming_the_line(tmp_path: Path) -> None:
    """30 invented chunk_sha pairs in both files would agree perfectly (κ 1.0 over n 30):
    a pair of no chunk of the project is refused, naming its line."""
    invented = [("q1", f"{i:064x}") for i in range(30)]
    (tmp_path / "l.jsonl").write_text(label_lines(invented, "a", lambda i: i % 2 == 0))
    (tmp_path / "c.jsonl").write_text(label_lines(invented, "b", lambda i: i % 2 == 0))
    proc = kappa_cli(tmp_path, tmp_path / "l.jsonl", tmp_path / "c.jsonl")
    assert proc.returncode == 1, proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'c.jsonl'}:1: field 'chunk_sha' chunk 000000000000…" in proc.stderr
    assert "not a chunk of the project's sessions (13 distinct chunks)" in proc.stderr
    assert not (tmp_path / "kappa.json").exists()
    # one invented pair among real ones: named by its line
    real = fixture_pairs()
    mixed = [*real[:5], ("q1", "f" * 64), *real[5:]]
    (tmp_path / "c.jsonl").write_text(label_lines(mixed, "b"))
    (tmp_path / "l.jsonl").write_text(label_lines(real, "a"))
    with pytest.raises(RecordError, match=r"c\.jsonl:6: field 'chunk_sha' chunk ffffffffffff…"):
        run_kappa(
            str(tmp_path / "l.jsonl"),
            str(tmp_path / "c.jsonl"),
            1,
            str(tmp_path / "k.json"),
            **PROJECT,
        )


def test_a_query_not_in_the_project_is_refused(tmp_path: Path) -> None:
    pairs = fixture_pairs()
    (tmp_path / "l.jsonl").write_text(label_lines(pairs, "a"))
    other = [*pairs[:3], ("q9", pairs[3][1])]
    (tmp_path / "c.jsonl").write_text(label_lines(other, "b"))
    with pytest.raises(RecordError, match=r"c\.jsonl:4: field 'query_id' query 'q9' is not one"):
        run_kappa(
            str(tmp_path / "l.jsonl"),
            str(tmp_path / "c.jsonl"),
            1,
            str(tmp_path / "k.json"),
            **PROJECT,
        )


def test_the_labels_file_as_its_own_calibration_is_refused(tmp_path: Path) -> None:
    """`grumem kappa --labels L --calibration L` would agree with itself (κ 1.0): the
    calibration's annotator may not be one of the labels'."""
    labels = FIXTURE / "labels.jsonl"
    proc = kappa_cli(tmp_path, labels, labels)
    assert proc.returncode == 1, proc.stdout
    assert "is the labels file itself" in proc.stderr and "Traceback" not in proc.stderr
    # a copy under another name: the same annotator, named with the line
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(labels.read_bytes())
    proc = kappa_cli(tmp_path, labels, copy)
    assert proc.returncode == 1, proc.stdout
    assert f"{copy}:1: field 'annotator' 'fixture-author' also made the labels" in proc.stderr
    assert not (tmp_path / "kappa.json").exists()


def test_the_judge_cannot_calibrate_itself(tmp_path: Path) -> None:
    """Judge labels name the judge's model as annotator; a calibration by the same
    model (say the judge rerun, or its labels relabelled) is not independent."""
    pairs = fixture_pairs()
    flips = {3, 17}
    (tmp_path / "l.jsonl").write_text(label_lines(pairs, "fake-judge", lambda i: i % 5 == 0))
    calibration = label_lines(pairs[:20], "alice", lambda i: (i % 5 == 0) != (i in flips))
    (tmp_path / "c.jsonl").write_text(calibration)
    (tmp_path / "j.jsonl").write_text(calibration.replace('"alice"', '"fake-judge"', 1))
    with pytest.raises(RecordError, match=r"j\.jsonl:1: field 'annotator' 'fake-judge'.*a person"):
        run_kappa(
            str(tmp_path / "l.jsonl"),
            str(tmp_path / "j.jsonl"),
            1,
            str(tmp_path / "k.json"),
            **PROJECT,
        )
    record = run_kappa(
        str(tmp_path / "l.jsonl"),
        str(tmp_path / "c.jsonl"),
        20,
        str(tmp_path / "k.json"),
        **PROJECT,
    )
    assert record["n"] == 20 and record["confusion"]["yes_no"] + record["confusion"]["no_yes"] == 2


def test_the_demo_calibration_is_of_the_demo_project(tmp_path: Path) -> None:
    record = run_kappa(
        str(DEMO / "labels.jsonl"),
        str(DEMO / "calibration.jsonl"),
        20,
        str(tmp_path / "kappa.json"),
        queries_path=DEMO / "queries.yaml",
        chunk_paths=[DEMO / "chunks"],
    )
    assert record["n"] == 24 and record["kappa"] >= 0.6


def test_missing_or_directory_inputs_are_one_line_errors(tmp_path: Path) -> None:
    labels = FIXTURE / "labels.jsonl"
    for bad, why in ((tmp_path / "none.jsonl", "does not exist"), (tmp_path, "is a directory")):
        proc = kappa_cli(tmp_path, labels, bad)
        assert proc.returncode == 1 and why in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1
    cmd = [sys.executable, "-m", "grumem", "kappa", "--labels", str(labels)]
    cmd += ["--calibration", str(FIXTURE / "calibration.jsonl"), "--queries", str(tmp_path)]
    cmd += ["--chunks", str(FIXTURE / "chunks.jsonl"), "--out", str(tmp_path / "kappa.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "is a directory, not a file" in proc.stderr, proc.stderr
    cmd[cmd.index("--queries") + 1] = str(FIXTURE / "queries.yaml")
    cmd[cmd.index("--chunks") + 1] = str(tmp_path / "missing.jsonl")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "missing.jsonl: cannot read" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1


def test_the_kappa_rule_checks_the_calibration_against_the_project(tmp_path: Path) -> None:
    """The workflow's kappa job gets the project's queries and chunk files: invented
    pairs in both labels and calibration (which would give κ 1.0) fail naming the line."""
    from support.workflow import demo_project, snakemake, write_config

    demo_shas = {c.sha for _, cs in iter_sessions([DEMO / "chunks"]) for c in cs}
    invented = [("environment", f"{i:064x}") for i in range(30)]
    assert not demo_shas & {sha for _, sha in invented}
    (tmp_path / "l.jsonl").write_text(label_lines(invented, "a", lambda i: i % 2 == 0))
    (tmp_path / "c.jsonl").write_text(label_lines(invented, "b", lambda i: i % 2 == 0))
    labels = {"source": "file", "path": str(tmp_path / "l.jsonl")}
    project = demo_project(labels=labels, calibration=str(tmp_path / "c.jsonl"))
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"demo": project})
    proc = snakemake(tmp_path, "results/demo/kappa.json", check=False)
    assert proc.returncode != 0
    log = (tmp_path / "logs/kappa/demo.log").read_text(encoding="utf-8")
    assert f"{tmp_path / 'c.jsonl'}:1: field 'chunk_sha'" in log, log
    assert not (tmp_path / "results/demo/kappa.json").exists()
    # the demo's own files pass, through the same rule
    write_config(tmp_path, "http://127.0.0.1:9/v1")
    snakemake(tmp_path, "results/demo/kappa.json")
    record = json.loads((tmp_path / "results/demo/kappa.json").read_text(encoding="utf-8"))
    assert record["n"] == 24
