"""A project's units and shards (grumem.core.shards), and the workflow computing them
once per run: its input functions must not re-glob the project for every job."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from grumem.core.shards import (
    CAP_FACTOR,
    glob_root,
    key_hash,
    project_shards,
    shard_names,
    stable_runs,
)
from grumem.errors import GrumemError
from support.workflow import REPO, env, files_under, snakemake, write_config

FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"
# the shard wildcard's constraint in workflow/rules/common.smk
SHARD_NAME = re.compile(r"s[0-9a-f]+")

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
    with pytest.raises(GrumemError, match="shard_size must be at least 1"):
        stable_runs(["a"], 0)
    with pytest.raises(GrumemError, match="shard_rule must be one of sorted, stable, not 'x'"):
        project_shards("p", ["a"], chunked=True, shard_size=1, shard_rule="x")


# ------------------------------------------------------------------ shard_rule: stable


def stable(names: list[str], size: int, chunked: bool = True) -> dict[str, tuple[str, ...]]:
    layout = project_shards(
        "p", [f"in/{n}" for n in names], chunked=chunked, shard_size=size,
        shard_rule="stable", root="in",
    )  # fmt: skip
    return dict(layout.shards)


def capped(shards: dict[str, tuple[str, ...]], size: int) -> bool:
    return any(len(members) == CAP_FACTOR * size for members in shards.values())


@given(file_names, st.integers(min_value=1, max_value=8), st.booleans(), st.randoms())
def test_stable_shards_hold_every_file_once_in_sorted_order_named_safely(
    names: list[str], size: int, chunked: bool, random
) -> None:
    shards = stable(names, size, chunked)
    prefix = "in/" if chunked else "results/p/chunks/"
    assert [c for members in shards.values() for c in members] == [
        prefix + n for n in sorted(names)
    ]
    assert all(members for members in shards.values())
    assert all(len(members) <= CAP_FACTOR * size for members in shards.values())
    assert all(SHARD_NAME.fullmatch(name) for name in shards)
    # a shard is named by its first file, wherever it stands
    assert [name for name in shards] == [
        "s" + key_hash(members[0].removeprefix(prefix))[:12] for members in shards.values()
    ]
    shuffled = list(names)
    random.shuffle(shuffled)
    assert stable(shuffled, size, chunked) == shards  # the glob's order does not matter


@given(file_names, st.from_regex(r"[a-z0-9]{1,8}\.jsonl", fullmatch=True), st.integers(1, 8))
def test_a_file_added_changes_at_most_the_two_shards_it_lands_in(
    names: list[str], new: str, size: int
) -> None:
    assume(new not in names)
    before, after = stable(names, size), stable([*names, new], size)
    assume(not capped(before, size) and not capped(after, size))
    changed = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    assert len(changed) <= 2
    # ...and they are the ones holding the new file, or the one it was cut from
    assert all(f"in/{new}" in after.get(n, ()) or n in before for n in changed)
    assert any(f"in/{new}" in after.get(n, ()) for n in changed)


def test_a_run_without_a_boundary_is_cut_at_the_cap() -> None:
    size = 2
    keys = [k for k in (f"k{i:03d}" for i in range(100)) if int(key_hash(k), 16) % size][:19]
    cap = CAP_FACTOR * size
    assert stable_runs(keys, size) == [(0, cap), (cap, 2 * cap), (2 * cap, 19)]


def test_stable_names_do_not_depend_on_where_the_project_lives() -> None:
    assert glob_root("/data/t/**/*.jsonl") == "/data/t"
    assert glob_root("t/*.jsonl") == "t" and glob_root("*.jsonl") == ""
    files = [f"s{i}/x{i}.jsonl" for i in range(20)]
    here = project_shards(
        "p", [f"a/{f}" for f in files], chunked=True, shard_size=3, shard_rule="stable",
        root=glob_root("a/*/*.jsonl"),
    )  # fmt: skip
    there = project_shards(
        "p", [f"/b/c/{f}" for f in files], chunked=True, shard_size=3, shard_rule="stable",
        root=glob_root("/b/c/*/*.jsonl"),
    )  # fmt: skip
    assert list(here.shards) == list(there.shards)
    assert [len(m) for m in here.shards.values()] == [len(m) for m in there.shards.values()]


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
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(
        tmp_path,
        "http://127.0.0.1:9/v1",
        projects={"p": project},
        shard_size=5,
        shard_rule="sorted",
    )
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
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(
        tmp_path,
        "http://127.0.0.1:9/v1",
        projects={"p": project},
        shard_size=2,
        shard_rule="sorted",
    )
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


def test_a_new_transcript_reruns_only_the_shard_it_lands_in(tmp_path: Path, fake_server) -> None:
    """A real run over 12 transcripts, then one more that sorts first: under `sorted`
    every shard runs again; under `stable` only the shard it lands in (and the
    project-wide jobs)."""
    server = fake_server(FAKE_DEMO)
    reruns = {}
    for rule in ("sorted", "stable"):
        work = tmp_path / rule
        transcripts = work / "transcripts"
        transcripts.mkdir(parents=True)

        def add(name: str) -> None:
            (transcripts / name).write_text(  # noqa: B023
                json.dumps({"role": "user", "text": f"{name}: the build failed"}) + "\n"
            )

        for i in range(12):
            add(f"t{i:02d}.jsonl")
        (work / "queries.yaml").write_text('{"queries": [{"id": "q", "question": "?"}]}')
        project = {
            "transcripts": {"glob": str(transcripts / "*.jsonl"), "format": "records"},
            "queries": str(work / "queries.yaml"),
        }
        write_config(work, server.base_url, projects={"p": project}, shard_size=3, shard_rule=rule)
        target = "results/p/log.jsonl"
        snakemake(work, target)
        assert "Nothing to be done" in snakemake(work, "-n", target).stdout
        add("a.jsonl")
        reruns[rule] = job_counts(snakemake(work, "-n", target).stdout)
        snakemake(work, target)
        assert len((work / target).read_text().splitlines()) == 13
        if rule == "stable":
            files = sorted(str(p) for p in transcripts.iterdir())
            layout = project_shards(
                "p", files, chunked=False, shard_size=3, shard_rule="stable",
                root=str(transcripts),
            )  # fmt: skip
            first = next(iter(layout.shards))
            assert layout.shards[first][0] == "results/p/chunks/a.jsonl"
            manifest = json.loads((work / f"results/p/chunked/{first}.json").read_text())
            assert manifest["transcripts"][0]["transcript"] == str(transcripts / "a.jsonl")
    per_shard = ("chunk", "prompts", "responses", "gates")
    # 12 transcripts in 4 shards of 3, one added in front: all 4 and a fifth
    assert [reruns["sorted"][r] for r in per_shard] == ["5"] * 4
    assert [reruns["stable"][r] for r in per_shard] == ["1"] * 4
    assert reruns["stable"]["sessions"] == reruns["stable"]["log"] == "1"
