"""`grumem evaluate-compare`: the export fixture's log run twice end to end (its
README's hand count), three scripted policies against golden compare.json and
compare.md, and bad input refused with nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grumem.errors import GrumemError, MissingLabelsError, RecordError
from grumem.io.jsonl import validate
from grumem.records.compare import CompareResult
from grumem.report.evaluation_plots import PLOTS
from grumem.stages.evaluate_compare import evaluate_compare, parse_runs
from support.checkout import FIXTURES_DIR
from support.policy_logs import (
    CHUNKS,
    FIXTURE,
    LABELS,
    always_continue,
    end_at_once,
    follow_labels,
    policy_log,
    write_log,
)

EXPECTED = FIXTURES_DIR / "expected"
POLICIES = {"continue": always_continue, "follow-labels": follow_labels, "end-at-1": end_at_once}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grumem", "evaluate-compare", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_the_export_fixture_twice_end_to_end(tmp_path: Path) -> None:
    """Two runs of one recorded log: its README's hand count, and a pair with nothing
    between them."""
    log = str(FIXTURE / "log.jsonl")
    run = run_cli(
        *("--run", f"first={log}", "--run", f"second={log}"),
        *("--labels", str(LABELS), "--chunks", str(CHUNKS)),
        *("--out-json", "compare.json", "--out-md", "compare.md", "--plots-dir", "plots"),
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "2 policies (first, second), 1 pairs" in run.stderr
    document = json.loads((tmp_path / "compare.json").read_text(encoding="utf-8"))
    validate(document, "compare")
    result = CompareResult.convert(document)
    p = result.policies["first"]
    assert p == result.policies["second"]
    # fixtures/export/README.md: 6 trajectories, 24 turns, 23 parsed, r_update +1: 19
    assert (p.trajectories, p.aborted, p.turns, p.asks) == (6, 2, 24, 24)
    assert (p.parse_rate.numerator, p.parse_rate.denominator) == (23, 24)
    assert (p.update_agreement.numerator, p.update_agreement.denominator) == (19, 24)
    # r_exit: on time 1, early 1, late 1, no evidence 1, aborted 2 (one without turns)
    exits = {k: v["numerator"] for k, v in p.exit.to_dict().items()}
    assert exits == {"on_time": 1, "early": 1, "late": 1, "no_evidence": 1, "no_decision": 2}
    assert p.exit_no_decision.to_dict() == {"aborted": 2, "no_exit_gate": 0}
    # T1 exits at 4 (last evidence 2), T2 at 5 (5), T3 at 2 (5)
    assert p.exit_offset.histogram == {"-3": 1, "0": 1, "2": 1}
    # an L1 log reads every chunk: T1-T4 read 4 + 7 + 7 + 4 of their sessions' 22
    assert p.levels.to_dict() == {"L1": 6, "L2": 0}
    assert (p.speedup.value, p.speedup.numerator, p.speedup.denominator) == (1.0, 22, 22)
    assert p.latency_s_per_turn.value == 0.25
    (pair,) = result.pairs
    assert (pair.a, pair.b, pair.keys, pair.groups) == ("first", "second", 6, 5)
    for figure in pair.figures.to_dict().values():
        assert figure["wins_a"] == figure["wins_b"] == 0
        assert figure["difference"] in (0, None) and not figure["beyond_noise"]
    assert pair.figures.exit_on_time.p_value == 1.0
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(PLOTS)
    assert (tmp_path / "compare.md").read_text(encoding="utf-8").startswith("# Policy comparison")


@pytest.fixture
def three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The three scripted policies' logs, the labels and chunks, by relative names."""
    shutil.copy(LABELS, tmp_path / "labels.jsonl")
    shutil.copy(CHUNKS, tmp_path / "chunks.jsonl")
    for name, policy in POLICIES.items():
        write_log(tmp_path / f"{name}.jsonl", policy_log(policy, usage=name != "continue"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def compare_three(out: str = ".", plots: str | None = None) -> CompareResult:
    return evaluate_compare(
        parse_runs([f"{name}={name}.jsonl" for name in POLICIES]),
        "labels.jsonl",
        ["chunks.jsonl"],
        f"{out}/compare.json",
        f"{out}/compare.md",
        plots,
    )


def test_three_policies_give_the_golden_files(three: Path) -> None:
    result = compare_three(plots="plots")
    assert list(result.policies) == ["continue", "end-at-1", "follow-labels"]
    assert (three / "compare.json").read_bytes() == (EXPECTED / "compare.json").read_bytes()
    assert (three / "compare.md").read_bytes() == (EXPECTED / "compare.md").read_bytes()
    svgs = {name: (three / "plots" / name).read_bytes() for name in PLOTS}
    # the same inputs, the same bytes (written elsewhere, all but the paths alike)
    compare_three(out="again", plots="again/plots")
    assert (three / "again/compare.json").read_bytes() == (three / "compare.json").read_bytes()
    assert {n: (three / "again/plots" / n).read_bytes() for n in PLOTS} == svgs


def outputs(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if p.suffix in (".json", ".md"))


def test_a_policy_named_twice_is_refused(three: Path) -> None:
    with pytest.raises(GrumemError, match="policy 'a' is named twice"):
        parse_runs(["a=continue.jsonl", "a=end-at-1.jsonl"])
    run = run_cli(
        *("--run", "a=continue.jsonl", "--run", "a=end-at-1.jsonl", "--labels", "labels.jsonl"),
        *("--chunks", "chunks.jsonl", "--out-json", "compare.json", "--out-md", "compare.md"),
        cwd=three,
    )
    assert run.returncode == 1
    assert "policy 'a' is named twice (also --run a=continue.jsonl)" in run.stderr
    assert outputs(three) == []


@pytest.mark.parametrize(
    ("run", "why"),
    [
        ("continue.jsonl", "expected NAME=LOG_JSONL"),
        ("=continue.jsonl", "the name '' must be"),
        ("a b=continue.jsonl", "the name 'a b' must be"),
        ("a=", "expected NAME=LOG_JSONL"),
    ],
)
def test_a_malformed_run_is_refused(run: str, why: str) -> None:
    with pytest.raises(GrumemError, match=why):
        parse_runs([run])


def test_a_turn_without_a_label_is_refused_naming_file_and_line(three: Path) -> None:
    labels = (three / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    # drop q1's label of s-beta's last chunk: read by `continue` (the first run read)
    lines = policy_log(always_continue)
    last_beta = next(
        i for i, line in enumerate(lines, start=1) if line["query_id"] == "q1" and line["t"] == 7
    )
    sha = lines[last_beta - 1]["chunk_sha"]
    kept = [x for x in labels if not (f'"chunk_sha":"{sha}"' in x and '"q1"' in x)]
    (three / "labels.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in three.iterdir() if p.is_file()}
    with pytest.raises(MissingLabelsError) as info:
        compare_three()
    message = str(info.value)
    assert f"continue.jsonl:{last_beta} eval/q1/s-beta/0 t=7" in message
    assert "1 turn(s) and 0 session chunk(s) of continue.jsonl" in message
    assert outputs(three) == []
    assert {p.name: p.read_bytes() for p in three.iterdir() if p.is_file()} == before


def test_an_unvisited_chunk_without_a_label_is_refused(three: Path) -> None:
    """A policy that stops early never reads a session's later chunks: their labels
    still decide t_last_evidence, so they are required all the same."""
    lines = policy_log(always_continue)
    sha = next(x["chunk_sha"] for x in lines if x["query_id"] == "q1" and x["t"] == 7)
    labels = (three / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [x for x in labels if not (f'"chunk_sha":"{sha}"' in x and '"q1"' in x)]
    (three / "labels.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    with pytest.raises(MissingLabelsError, match="session 's-beta' chunk t=7"):
        evaluate_compare(
            [("once", "end-at-1.jsonl")], "labels.jsonl", ["chunks.jsonl"], "c.json", "c.md"
        )
    assert outputs(three) == []


def test_a_log_of_other_chunks_is_refused(three: Path) -> None:
    lines = policy_log(end_at_once)
    lines[0]["chunk_sha"] = lines[1]["chunk_sha"]  # q1/s-alpha t=1 claims s-beta's chunk
    write_log(three / "end-at-1.jsonl", lines)
    with pytest.raises(RecordError, match="end-at-1.jsonl:1: field 'chunk_sha'.*re-chunked"):
        compare_three()
    assert outputs(three) == []


def test_a_run_without_trajectories_is_refused(three: Path) -> None:
    (three / "empty.jsonl").write_bytes(b"")
    with pytest.raises(GrumemError, match="--run e=empty.jsonl: the log holds no trajectory"):
        evaluate_compare([("e", "empty.jsonl")], "labels.jsonl", ["chunks.jsonl"], "c.json", "c.md")
    with pytest.raises(GrumemError, match="--run m=missing.jsonl: the log does not exist"):
        evaluate_compare(
            [("m", "missing.jsonl")], "labels.jsonl", ["chunks.jsonl"], "c.json", "c.md"
        )
    assert outputs(three) == []


def test_one_project_twice_in_a_log_is_refused(three: Path) -> None:
    lines = policy_log(end_at_once)
    twice = [*lines, *({**x, "trajectory_id": "other/" + x["trajectory_id"]} for x in lines)]
    write_log(three / "twice.jsonl", twice)
    with pytest.raises(RecordError, match="twice.jsonl:7: field 'trajectory_id'.*a policy runs"):
        evaluate_compare([("t", "twice.jsonl")], "labels.jsonl", ["chunks.jsonl"], "c.json", "c.md")


def test_an_output_that_is_an_input_is_refused(three: Path) -> None:
    before = (three / "continue.jsonl").read_bytes()
    with pytest.raises(GrumemError, match="is also an input"):
        evaluate_compare(
            [("c", "continue.jsonl")], "labels.jsonl", ["chunks.jsonl"], "continue.jsonl", "c.md"
        )
    assert (three / "continue.jsonl").read_bytes() == before
