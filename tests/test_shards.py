"""A project's units and shards (grumem.shards), and the workflow computing them
once per run: its input functions must not re-glob the project for every job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from workflow_helpers import REPO, env, files_under, snakemake, write_config

from grumem.errors import GrumemError
from grumem.shards import project_shards, shard_names

file_names = st.lists(
    st.from_regex(r"[a-z0-9]{1,8}\.jsonl", fullmatch=True), unique=True, max_size=40
)


@given(file_names, st.integers(min_value=1, max_value=12), st.booleans())
def test_shards_cut_the_sorted_chunks_into_runs_of_shard_size(
    names: list[str], size: int, chunked: bool
) -> None:
    layout = project_shards("p", [f"in/{n}" for n in names], chunked=chunked, shard_size=size)
    ordered = sorted(names)
    expected = [f"in/{n}" if chunked else f"results/p/chunks/{n}" for n in ordered]
    assert list(layout.chunks) == expected
    assert list(layout.shards) == [f"s{i:03d}" for i in range(-(-len(names) // size))]
    # consecutive runs, each full but the last
    assert [c for shard in layout.shards.values() for c in shard] == expected
    assert all(len(s) == size for s in list(layout.shards.values())[:-1])
    if not chunked:
        assert dict(layout.units) == {n: f"in/{n}" for n in ordered}


def test_the_demo_shards_are_the_sorted_files_three_to_a_shard() -> None:
    files = [f"c/{s}.jsonl" for s in ("s5", "s1", "s4", "s2", "s3")]
    layout = project_shards("demo", files, chunked=True, shard_size=3)
    assert dict(layout.shards) == {
        "s000": ("c/s1.jsonl", "c/s2.jsonl", "c/s3.jsonl"),
        "s001": ("c/s4.jsonl", "c/s5.jsonl"),
    }


def test_an_unknown_shard_or_unit_is_an_error_naming_the_project() -> None:
    layout = project_shards("p", ["t/a.jsonl", "t/b.jsonl"], chunked=False, shard_size=1)
    with pytest.raises(GrumemError, match=r"project p: no shard 's002' \(it has 2: s000 to s001\)"):
        layout.shard("s002")
    with pytest.raises(GrumemError, match=r"project p: no transcript makes the unit 'c\.jsonl'"):
        layout.transcript("c.jsonl")
    assert layout.transcript("b.jsonl") == "t/b.jsonl"


def test_two_transcripts_with_one_unit_name_fail_naming_both() -> None:
    with pytest.raises(GrumemError, match=r"a/s\.jsonl and b/s\.jsonl"):
        project_shards("p", ["a/s.jsonl", "b/s.jsonl"], chunked=False, shard_size=5)


def test_shard_size_below_one_is_refused() -> None:
    with pytest.raises(GrumemError, match="shard_size must be at least 1"):
        shard_names(3, 0)


# Runs `python -m snakemake` with an audit hook (sys.addaudithook: glob.glob
# raises the `glob.glob` event) that counts the globs of the project's pattern.
COUNT_GLOBS = """
import atexit, runpy, sys
out, pattern = sys.argv[1], sys.argv[2]
count = [0]
def hook(event, args):
    if event == "glob.glob" and args[0] == pattern:
        count[0] += 1
sys.addaudithook(hook)
atexit.register(lambda: open(out, "w").write(str(count[0])))
sys.argv = ["snakemake", *sys.argv[3:]]
runpy.run_module("snakemake", run_name="__main__")
"""


def test_a_dry_run_globs_each_project_once_whatever_its_job_count(tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    for i in range(60):
        lines = [{"role": "user", "text": f"session {i}"}, {"role": "assistant", "text": "ok"}]
        (transcripts / f"t{i:03d}.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8"
        )
    for name in ("labels.jsonl", "calibration.jsonl"):
        (tmp_path / name).write_text("", encoding="utf-8")
    (tmp_path / "queries.yaml").write_text('{"queries": [{"id": "q", "question": "?"}]}')
    pattern = str(transcripts / "*.jsonl")
    project = {
        "transcripts": {"glob": pattern},
        "queries": str(tmp_path / "queries.yaml"),
        "labels": {"source": "file", "path": str(tmp_path / "labels.jsonl")},
        "calibration": str(tmp_path / "calibration.jsonl"),
    }
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"p": project}, shard_size=5)
    counted = tmp_path / "globs.txt"
    args = ["-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "1", "-n", "all"]
    proc = subprocess.run(
        [sys.executable, "-c", COUNT_GLOBS, str(counted), pattern, *args],
        capture_output=True,
        text=True,
        env=env(),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = proc.stdout.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:]
    counts = dict(line.split() for line in table)
    # 60 transcripts in shards of 5: 12 chunk jobs (one per shard), 12 of prompts
    assert (counts["chunk"], counts["prompts"], counts["gates"]) == ("12", "12", "12")
    # one glob for the run, not one per job (the old input functions made 78)
    assert counted.read_text() == "1"


def job_counts(dry_run_stdout: str) -> dict[str, str]:
    table = dry_run_stdout.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:]
    return dict(line.split() for line in table)


def test_a_changed_transcript_reruns_only_its_shards_chunk_job(tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    for i in range(6):
        (transcripts / f"t{i}.jsonl").write_text(
            json.dumps({"role": "user", "text": f"session {i}: the build failed"}) + "\n"
        )
    (tmp_path / "queries.yaml").write_text('{"queries": [{"id": "q", "question": "?"}]}')
    project = {
        "transcripts": {"glob": str(transcripts / "*.jsonl"), "format": "records"},
        "queries": str(tmp_path / "queries.yaml"),
    }
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"p": project}, shard_size=2)
    target = "results/p/sessions.jsonl"
    assert job_counts(snakemake(tmp_path, "-n", target).stdout)["chunk"] == "3"
    snakemake(tmp_path, target)
    chunks = tmp_path / "results/p/chunks"
    # the paths of one job per transcript: results/p/chunks/<unit>/<session>.jsonl
    assert [p.relative_to(chunks).as_posix() for p in files_under(chunks)] == [
        f"t{i}.jsonl/t{i}.jsonl" for i in range(6)
    ]
    manifest = json.loads((tmp_path / "results/p/chunked/s001.json").read_text())
    assert [t["chunks"] for t in manifest["transcripts"]] == [
        [f"results/p/chunks/t{i}.jsonl/t{i}.jsonl"] for i in (2, 3)
    ]
    before = {p: p.read_bytes() for p in files_under(chunks)}
    (transcripts / "t3.jsonl").write_text(json.dumps({"role": "user", "text": "new text"}) + "\n")
    dry = snakemake(tmp_path, "-n", target).stdout
    assert job_counts(dry)["chunk"] == "1" and "results/p/chunked/s001.json" in dry
    snakemake(tmp_path, target)
    changed = {p for p in files_under(chunks) if p.read_bytes() != before[p]}
    assert changed == {chunks / "t3.jsonl" / "t3.jsonl"}
