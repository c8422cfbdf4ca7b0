"""`snakemake evaluate` through the real command: policies whose behaviour is known
exactly (fake servers on 127.0.0.1 scripted by tests/support/evaluate.py) measured on
the demo's sessions, every figure of compare.json against the hand count of the
demo's labels; then bad input."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from grumem.io.jsonl import read_jsonl
from support.evaluate import DEMO_HAND_COUNT, always_continue, end_at_1, follow_labels
from support.harness import start_fake_server
from support.workflow import REPO, demo_project, jobs, snakemake, write_config

EVAL = "results/demo/eval"
# every session of the demo held out: 10 (query, session) trajectories a policy
ALL_TEST = {"train": 0, "val": 0, "test": 1, "seed": 0}


def policy(url: str, model: str, **llm: Any) -> dict[str, Any]:
    return {"base_url": url, "model": model, "retries": 0, "timeout": 10, **llm}


def wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    """The Wilson score interval, written out here (grumem.core.confidence has its own)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)]


def rate(figure: dict, k: int, n: int) -> None:
    assert (figure["numerator"], figure["denominator"]) == (k, n), figure
    assert figure["value"] == pytest.approx(k / n if n else None, abs=1e-6)
    if n:
        assert figure["ci"] == pytest.approx(wilson(k, n), abs=2e-6)


def mean(figure: dict, numerator: float, denominator: int) -> None:
    assert (figure["numerator"], figure["denominator"]) == (numerator, denominator), figure
    assert figure["value"] == pytest.approx(round(numerator / denominator, 6), abs=1e-6)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The three policies over the demo, every session held out, at L2 (the default)."""
    work = tmp_path_factory.mktemp("evaluate")
    scripts = {
        "end-at-1": end_at_1("model-end-at-1"),
        "continue": always_continue("model-continue"),
        "follow": follow_labels("model-follow"),
    }
    servers = {}
    try:
        for name, script in scripts.items():
            servers[name] = start_fake_server(script, tmp_path_factory.mktemp(f"server-{name}"))
        # each its own model, as two checkpoints are: the cache is keyed by the request
        policies = {name: policy(s.base_url, f"model-{name}") for name, s in servers.items()}
        write_config(
            work,
            "http://127.0.0.1:9/v1",  # the workflow's own llm: no evaluation job asks it
            projects={"demo": demo_project(split=ALL_TEST)},
            evaluate={"policies": policies},
        )
        planned = jobs(snakemake(work, "-n", "evaluate").stdout)
        snakemake(work, "evaluate")
        compare = json.loads((work / EVAL / "compare.json").read_text(encoding="utf-8"))
        yield {"work": work, "planned": planned, "compare": compare, "servers": servers}
    finally:
        for server in servers.values():
            server.stop()


def test_the_plan_is_the_workflows_stages_per_policy(evaluated) -> None:
    # 5 demo sessions in shards of 3: two shards, for each of three policies
    assert evaluated["planned"] == {
        "sessions": 1,
        "evaluate_prompts": 6,
        "evaluate_responses": 6,
        "evaluate_gates": 6,
        "evaluate_log": 3,
        "evaluate_compare": 1,
        "evaluate": 1,
    }


def test_end_at_1_reads_one_chunk_a_trajectory(evaluated) -> None:
    p = evaluated["compare"]["policies"]["end-at-1"]
    n = len(DEMO_HAND_COUNT)  # 10 trajectories, 1 turn each
    assert (p["trajectories"], p["turns"], p["asks"], p["aborted"]) == (n, n, n, 0)
    assert p["levels"] == {"L1": 0, "L2": n}
    rate(p["parse_rate"], n, n)
    # it never says yes: it agrees where chunk 1 is no evidence
    no_at_1 = sum(not tr.label(1) for tr in DEMO_HAND_COUNT)
    assert no_at_1 == 4
    rate(p["update_agreement"], 4, 10)
    assert p["update_precision"]["value"] is None and p["update_precision"]["denominator"] == 0
    rate(p["update_recall"], 0, 10 - 4)
    # every trajectory with evidence ends before its last evidence chunk (3 at the least)
    with_evidence = sum(tr.last is not None for tr in DEMO_HAND_COUNT)
    assert with_evidence == 8
    exits = p["exit"]
    rate(exits["early"], 8, 10)
    rate(exits["no_evidence"], 2, 10)
    for kind in ("on_time", "late", "no_decision"):
        rate(exits[kind], 0, 10)
    chunks = sum(tr.chunks for tr in DEMO_HAND_COUNT)
    assert chunks == 72
    mean(p["chunks_read_mean"], 10, 10)
    mean(p["chunks_total_mean"], 72, 10)
    mean(p["speedup"], 72, 10)  # 7.2: the session's chunks over the chunks read
    offsets = [1 - tr.last for tr in DEMO_HAND_COUNT if tr.last is not None]
    assert p["exit_offset"]["histogram"] == {str(k): offsets.count(k) for k in sorted(set(offsets))}
    mean(p["exit_offset"]["mean"], sum(offsets), len(offsets))
    assert p["memory_tokens_by_t"] == {"1": {"turns": 10, "mean": 0, "median": 0, "max": 0}}


def test_always_continue_reads_every_chunk(evaluated) -> None:
    p = evaluated["compare"]["policies"]["continue"]
    assert (p["trajectories"], p["turns"]) == (10, 72)
    evidence = sum(len(tr.evidence) for tr in DEMO_HAND_COUNT)
    assert evidence == 43
    rate(p["update_agreement"], 43, 72)  # it says yes to every chunk
    rate(p["update_precision"], 43, 72)
    rate(p["update_recall"], 43, 43)
    # no `end`: t_exit is the last chunk, on time only where that is the last evidence
    on_time = [tr for tr in DEMO_HAND_COUNT if tr.last == tr.chunks]
    assert [tr.session for tr in on_time] == ["demo-03-npm-peer-deps"] * 2
    rate(p["exit"]["on_time"], 2, 10)
    rate(p["exit"]["late"], 6, 10)
    rate(p["exit"]["no_evidence"], 2, 10)
    rate(p["exit"]["early"], 0, 10)
    mean(p["chunks_read_mean"], 72, 10)
    mean(p["speedup"], 72, 72)
    # the memory gains a line a turn: it grows with t, over the trajectories still reading
    by_t = p["memory_tokens_by_t"]
    assert [by_t[str(t)]["turns"] for t in range(1, 13)] == [
        sum(tr.chunks >= t for tr in DEMO_HAND_COUNT) for t in range(1, 13)
    ]
    assert all(by_t[str(t)]["mean"] < by_t[str(t + 1)]["mean"] for t in range(1, 3))


def test_following_the_labels_agrees_and_exits_on_time(evaluated) -> None:
    p = evaluated["compare"]["policies"]["follow"]
    read = [tr.last or tr.chunks for tr in DEMO_HAND_COUNT]  # it stops at the last evidence
    assert sum(read) == 62
    assert (p["trajectories"], p["turns"]) == (10, 62)
    rate(p["update_agreement"], 62, 62)
    rate(p["update_precision"], 43, 43)
    rate(p["update_recall"], 43, 43)
    rate(p["exit"]["on_time"], 8, 10)  # wherever there is evidence
    rate(p["exit"]["no_evidence"], 2, 10)
    mean(p["chunks_read_mean"], 62, 10)
    mean(p["speedup"], 72, 62)
    assert p["exit_offset"]["histogram"] == {"0": 8}


def test_pairs_compare_on_the_same_trajectories(evaluated) -> None:
    pairs = {(p["a"], p["b"]): p for p in evaluated["compare"]["pairs"]}
    assert sorted(pairs) == [
        ("continue", "end-at-1"),
        ("continue", "follow"),
        ("end-at-1", "follow"),
    ]
    pair = pairs[("end-at-1", "follow")]
    assert (pair["keys"], pair["groups"], pair["only_a"], pair["only_b"]) == (10, 10, 0, 0)
    on_time = pair["figures"]["exit_on_time"]
    assert (on_time["value_a"], on_time["value_b"]) == (0, 0.8)
    assert (on_time["wins_a"], on_time["wins_b"], on_time["ties"]) == (0, 8, 2)
    assert on_time["difference"] == pytest.approx(-0.8) and on_time["winner"] == "follow"
    chunks = pair["figures"]["chunks_read_mean"]
    assert (chunks["value_a"], chunks["value_b"]) == (1, 6.2)
    assert chunks["better"] == "lower" and chunks["winner"] == "end-at-1"


def test_the_comparison_is_written_and_a_rerun_sends_nothing(evaluated) -> None:
    work = evaluated["work"]
    md = (work / EVAL / "compare.md").read_text(encoding="utf-8")
    assert "| turns answered | 72 | 10 | 62 |" in md
    for plot in ("exit_timing", "chunks_read", "memory_tokens_by_t"):
        assert (work / EVAL / f"{plot}.svg").read_text(encoding="utf-8").endswith("</svg>\n")
    # each policy's log holds its own trajectories, run by the workflow's stages
    log = list(read_jsonl(work / EVAL / "follow" / "log.jsonl", "log"))
    assert len(log) == 62 and {line["level"] for line in log} == {"L2"}
    assert "Nothing to be done" in snakemake(work, "-n", "evaluate").stdout
    sent = {name: s.stats()["answered"] for name, s in evaluated["servers"].items()}
    snakemake(work, "evaluate", "--forcerun", "evaluate_responses")
    assert {name: s.stats()["answered"] for name, s in evaluated["servers"].items()} == sent
    assert json.loads((work / EVAL / "compare.json").read_text()) == evaluated["compare"]


# ---------------------------------------------------------------- bad input


def test_a_policy_named_twice_is_refused_naming_it(tmp_path) -> None:
    config = write_config(tmp_path, None, evaluate={"policies": {"base": {"model": "a"}}})
    text = config.read_text(encoding="utf-8")
    twice = text.replace(
        "    base:\n      model: a\n", "    base:\n      model: a\n    base:\n      model: b\n"
    )
    assert twice != text
    config.write_text(twice, encoding="utf-8")
    proc = snakemake(tmp_path, "-n", "evaluate", check=False)
    assert proc.returncode != 0
    assert "duplicate key 'base'" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("evaluate", "message"),
    [
        ({"split": "dev"}, "field 'evaluate.split' 'dev' is not one of ['train', 'val', 'test']"),
        ({"level": "L3"}, "field 'evaluate.level' 'L3' is not one of ['L1', 'L2']"),
        ({"policies": {"a b": {}}}, "field 'evaluate.policies' 'a b' does not match"),
        ({"policies": {}}, "nothing to evaluate: name the policies in evaluate.policies"),
    ],
)
def test_bad_evaluate_settings_are_refused_naming_the_setting(tmp_path, evaluate, message) -> None:
    write_config(tmp_path, None, evaluate=evaluate)
    proc = snakemake(tmp_path, "-n", "evaluate", check=False)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr, proc.stderr[-2000:]


def test_a_policy_whose_server_is_down_fails_alone(tmp_path, fake_server) -> None:
    """Its error names it, nothing of its answers is written; the other policy's
    evaluation is complete (with --keep-going), and no comparison is made without it."""
    up = fake_server(follow_labels("model-up"))
    policies = {
        "up": policy(up.base_url, "model-up"),
        "down": policy("http://127.0.0.1:9/v1", "model-down"),  # nothing listens there
    }
    write_config(tmp_path, None, evaluate={"policies": policies})
    proc = snakemake(tmp_path, "evaluate", "--keep-going", check=False)
    assert proc.returncode != 0
    logs = "".join(
        p.read_text() for p in (tmp_path / "logs/evaluate_responses/demo/down").iterdir()
    )
    assert "policy down (evaluate.policies.down): every request failed" in logs
    assert "Is the server at evaluate.policies.down.base_url up?" in logs
    down = tmp_path / EVAL / "down"
    # the shard holding demo-04 has no responses file; the other shard, with no session
    # of the test split, has a file of none (no server asked)
    written = {p.name: p.stat().st_size for p in (down / "responses").iterdir()}
    prompts = {p.name: p.stat().st_size for p in (down / "prompts").iterdir()}
    assert len(prompts) == 2 and len(written) == 1
    assert all(prompts[name] == size == 0 for name, size in written.items())
    assert {p.name for p in (down / "gates").iterdir()} <= set(written)
    assert not (down / "log.jsonl").exists()
    up_log = list(read_jsonl(tmp_path / EVAL / "up" / "log.jsonl", "log"))
    # the demo's test split: demo-04 (9 chunks), read to its last evidence (7) or all
    assert len(up_log) == 7 + 9
    assert not (tmp_path / EVAL / "compare.json").exists()


# ---------------------------------------------------------------- the demo, replayed

DEMO_COMPARE = REPO / "fixtures" / "expected" / "demo-compare.md"


def test_the_demos_evaluate_replays_the_embedded_models_recorded_answers(tmp_path) -> None:
    """config.yaml's two policies, the embedded model with and without its gate grammar,
    on the demo's test split: answered from the recording of
    scripts/record_evaluate_demo.py (fixtures/evaluate/cache/), no server started. The
    comparison is the golden file, whose figures table the README shows."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "fixtures").symlink_to(REPO / "fixtures")
    cache = tmp_path / "cache"
    shutil.copytree(REPO / "fixtures" / "evaluate" / "cache", cache)
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    for llm in config["evaluate"]["policies"].values():
        llm.update({"mode": "replay", "cache_dir": str(cache)})
    (work / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    snakemake(work, "evaluate")
    compare = (work / EVAL / "compare.md").read_text(encoding="utf-8")
    assert compare == DEMO_COMPARE.read_text(encoding="utf-8")
    # every line of the README's demo table is the comparison's
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = readme.split("| figure | `free` | `grammar` |\n", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in shown.splitlines() if line.startswith("| ")]
    assert len(rows) >= 2 and all(row in compare.splitlines() for row in rows), rows
    # nothing was sent: the cache holds the recording only
    assert sorted(p.name for p in cache.rglob("*.json")) == sorted(
        p.name for p in (REPO / "fixtures" / "evaluate" / "cache").rglob("*.json")
    )
