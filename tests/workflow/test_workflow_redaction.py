"""Secrets planted in agent transcripts never reach a file the workflow writes: the
real `snakemake` over a transcripts project (the fixtures of three formats and a
transcript holding one fake secret of every kind of the labelled set), against the
fake OpenAI server, to the corpus and the report; then every file under results/
(the response cache included), logs/ and .snakemake/ is read for each secret."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grumem.core.redact import PLACEHOLDER
from support.workflow import (
    DEMO,
    FAKE_DEMO,
    REPO,
    assert_no_secret,
    files_under,
    read_lines,
    snakemake,
    write_config,
)

LABELLED = REPO / "fixtures" / "secrets" / "labelled.jsonl"


def planted_secrets() -> list[tuple[str, str, str]]:
    """(kind, the text holding it, the secret) for the first case of every kind."""
    chosen: dict[str, tuple[str, str, str]] = {}
    for line in LABELLED.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if len(case["secrets"]) == 1:
            (s,) = case["secrets"]
            chosen.setdefault(s["kind"], (s["kind"], case["text"], s["value"]))
    return list(chosen.values())


def transcripts(under: Path) -> list[tuple[str, str, str]]:
    """The project's transcripts: fixtures of three formats and a planted one."""
    under.mkdir()
    for fmt in ("claude-code", "codex-cli", "openai"):
        for f in (REPO / "fixtures" / "transcripts" / fmt).iterdir():
            if f.suffix in (".json", ".jsonl"):
                shutil.copy(f, under / f.name)
    planted = planted_secrets()
    records = [{"role": "user", "text": "My deploy fails; here is what I have."}]
    records += [{"role": "tool_result", "text": text} for _, text, _ in planted]
    records += [{"role": "assistant", "text": "The error is fixed: the key was wrong."}]
    (under / "planted.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
    )
    return planted


@pytest.mark.slow
def test_no_planted_secret_reaches_any_file_of_the_run(tmp_path: Path, fake_server) -> None:
    planted = transcripts(tmp_path / "transcripts")
    assert len(planted) >= 25
    server = fake_server(FAKE_DEMO)
    project = {
        "transcripts": {"glob": str(tmp_path / "transcripts" / "*"), "format": "auto"},
        "queries": str(DEMO / "queries.yaml"),
        "labels": {"source": "judge"},
        "calibration": str(tmp_path / "calibration.jsonl"),
    }
    write_config(tmp_path, server.base_url, projects={"p": project})
    # the judge's labels first: the calibration is a person's labelling of the same pairs
    snakemake(tmp_path, "results/p/labels.jsonl")
    labels = read_lines(tmp_path / "results/p/labels.jsonl")
    (tmp_path / "calibration.jsonl").write_text(
        "".join(json.dumps({**x, "annotator": "a person"}) + "\n" for x in labels),
        encoding="utf-8",
    )
    snakemake(tmp_path, "all")
    assert (tmp_path / "results/p/corpus/turns.parquet").exists()
    assert (tmp_path / "results/p/report/viewer.html").exists()

    cache = files_under(tmp_path / "results/cache")
    assert cache, "the response cache is under results/ and read too"
    read = 0
    for _, _, secret in planted:
        read = assert_no_secret(tmp_path, secret)
        # the secret's every line, for a private key: no part of it survives
        for piece in secret.split("\\n" if "\\n" in secret else "\n"):
            if len(piece) >= 16:
                assert_no_secret(tmp_path, piece)
    assert read > 50

    # what stands in their place: placeholders in the chunks, the requests and the corpus
    chunks = "".join(p.read_text() for p in files_under(tmp_path / "results/p/chunks"))
    corpus = (tmp_path / "results/p/corpus/trajectories.jsonl").read_text()
    assert len(set(PLACEHOLDER.findall(chunks))) >= len(planted)
    assert PLACEHOLDER.search(corpus)
    manifests = [json.loads(p.read_text()) for p in files_under(tmp_path / "results/p/chunked")]
    counted = {}
    for m in manifests:
        assert m["redaction"]["detector"] == "kingfisher-secret-scanner"
        for t in m["transcripts"]:
            if t["transcript"].endswith("planted.jsonl"):
                counted = t["redacted"]
    assert sum(counted.values()) >= len(planted)
    log = "".join(p.read_text() for p in files_under(tmp_path / "logs/chunk"))
    assert "redacted: " in log and "redacted: none" in log  # per session, fixtures hold none
