"""Online GRU-Mem training in verl 0.9.1, proven with verl's own classes on CPU.

tests/verl_online_check.py runs once in .venv-verl (made by `make venv-verl`, a
prerequisite of `make test`) with four jobs; each test here asserts on one:

- a real model (SmolLM2's GGUF through llama.cpp, token ids in and out, under the
  gate grammar) drives the `grumem` agent loop over a demo session at L1 and L2;
- the agent loop fed the recorded answers of the demo run (fake server,
  loop.samples 2) rebuilds the recorded user messages byte for byte, and the
  group step gives the corpus's rewards and advantages;
- the group step's per-turn values pass through verl's own advantage step with
  the registered estimator (stock `grpo` broadcasts one value per rollout);
- verl's v1 rollout path: Ray on 127.0.0.1, TransferQueue, the grumem worker,
  the sampler, the trainer's advantage step over what TransferQueue holds.

The oracles here are independent of grumem.verl: the strict gate parser and
PromptBuilder.build (the template filled in one pass) give the expected
messages; grumem.core.advantages the expected advantages. Nothing is skipped: without
.venv-verl the tests fail saying how to make it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grumem.core.advantages import ScoredTrajectory, group_advantages, mix
from grumem.core.gate_parser import ParseError, parse_gate_response
from grumem.core.template import Budget
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_prompt_builder
from grumem.io.tokenizer import cl100k_tokens
from grumem.verl.group_step import step_metrics
from grumem.verl.rollout import read_rollout_row
from support.rollout_rows import demo_rollout_rows
from support.verl_venv import exported_demo_corpus, smollm2_gguf
from support.workflow import REPO

TOKENS = cl100k_tokens()

VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"
CHECK = Path(__file__).parents[1] / "support" / "verl_online_check.py"
GRUMEM = str(Path(sys.executable).with_name("grumem"))
REAL = ("errors-and-fixes", "demo-03-npm-peer-deps")
OVER_BUDGET = ("environment", "demo-03-npm-peer-deps")  # exported with a section budget of 50

YES = "<think>t</think>\n<check>yes</check>\n<update>{m}</update>\n<next>{n}</next>"
NO = "<think>t</think>\n<check>no</check>\n<update>{m}</update>\n<next>{n}</next>"


def answer(check: bool, memory: str = "m", end: bool = False) -> str:
    return (YES if check else NO).format(m=memory, n="end" if end else "continue")


# two rollouts of demo-03 (3 chunks, all evidence): different returns, and at t=2
# and t=3 equal r_update (Â_turn has no variance there); then two alike rollouts
GROUP_CASES = [
    {
        "level": "L1",
        "query_id": "errors-and-fixes",
        "session": "demo-03-npm-peer-deps",
        "scripts": [
            [answer(True, "one"), answer(False), answer(True, "three", end=True)],
            [answer(False), answer(False), answer(True, "x")],
        ],
    },
    {
        "level": "L2",
        "query_id": "environment",
        "session": "demo-03-npm-peer-deps",
        "scripts": [[answer(True), answer(True, end=True)]] * 2,
    },
]


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    assert VERL_PYTHON.exists(), (
        f"{VERL_PYTHON} does not exist: these tests run verl in a venv of its own;"
        " make it with `make venv-verl` (about 5-8 minutes and 6.5 GB the first time)"
    )
    work = tmp_path_factory.mktemp("online")
    corpus = exported_demo_corpus(work, tmp_path_factory)
    # the command line docs/verl.md shows, on the corpus the workflow exported
    overrides = verl_config("--online", "--corpus", str(corpus))
    docs_args, docs_overrides = docs_gpu_command()
    corpus_at = docs_args.index("--corpus") + 1
    docs_args[corpus_at] = str(corpus)
    spec = {
        "gguf": str(smollm2_gguf()),
        "scratch": str(work / "scratch"),
        "jobs": {
            "loop": None,
            "replay": replay_groups(corpus),
            "group": GROUP_CASES,
            "compose": [*verl_config(*docs_args), *docs_overrides],
            "dataset": {
                "overrides": overrides,
                "key": list(REAL),
                "script": GROUP_CASES[0]["scripts"][0],
            },
            "worker": {
                "query_id": REAL[0],
                "session": REAL[1],
                "overrides": overrides,
                "scripts": GROUP_CASES[0]["scripts"],
                "over_budget": list(OVER_BUDGET),
            },
        },
    }
    (work / "scratch").mkdir()
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    home = work / "home"  # every cache verl, Ray, datasets and transformers keep
    (home / "tmp").mkdir(parents=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
        "TMPDIR": str(home / "tmp"),
        # Ray's session directory holds Unix sockets (at most 107 bytes a path): a short one
        "RAY_TMPDIR": str(tmp_path_factory.mktemp("r")),
        # Ray's single-node mode: the node's address is 127.0.0.1, so Ray's and
        # TransferQueue's sockets bind loopback only, never the machine's address
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    }
    proc = subprocess.run(
        [str(VERL_PYTHON), str(CHECK), str(spec_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["corpus"] = str(corpus)
    print(
        "verl online check: " + ", ".join(f"{k} {v} s" for k, v in out.items() if k.endswith("_s"))
    )
    return out


def verl_config(*args: str) -> list[str]:
    proc = subprocess.run(
        [GRUMEM, "verl-config", *args], capture_output=True, text=True, check=True
    )
    return shlex.split(proc.stdout)


def docs_gpu_command() -> tuple[list[str], list[str]]:
    """docs/verl.md's GPU command: the `grumem verl-config` arguments in its $(…), and
    the overrides after it."""
    text = (REPO / "docs" / "verl.md").read_text(encoding="utf-8")
    block = text.split("<!-- online-gpu-command -->", 1)[1].split("```", 2)[1]
    line = block.replace("\\\n", " ")
    inner = line.split("$(", 1)[1].split(")", 1)[0]
    args = shlex.split(inner)
    assert args[:2] == [".venv/bin/grumem", "verl-config"], args
    rest = shlex.split(line.split(")", 1)[1])
    return args[2:], rest


def read_trajectories(corpus: Path) -> dict[str, dict]:
    lines = (corpus / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    return {t["trajectory_id"]: t for t in map(json.loads, lines)}


def replay_groups(corpus: Path) -> list[dict]:
    """Every recorded group of two samples with its sessions row."""
    by_id = read_trajectories(corpus)
    rows = {
        (r["extra_info"]["query_id"], r["extra_info"]["session"]): r
        for r in demo_rollout_rows(level="L1")
    }
    groups = []
    for key, row in rows.items():
        ids = [f"demo/{key[0]}/{key[1]}/{k}" for k in (0, 1)]
        samples = [
            {"trajectory_id": i, "responses": [t["response"] for t in by_id[i]["turns"]]}
            for i in ids
        ]
        groups.append({"row": row, "samples": samples})
    return groups


# ---------------------------------------------------------------- the oracles


def expected_turns(row: dict, responses: list[str]) -> list[dict]:
    """User messages, gates and memories by the workflow's rules, computed here:
    the strict parser, U_t yes -> the candidate, else M_{t-1}; the message from
    PromptBuilder.build (within budget, or it raises)."""
    info = row["extra_info"]
    builder = load_prompt_builder(GRU_MEM_TEMPLATE, info["system"], Budget(**info["budget"]))
    memory, out = None, []
    for chunk, response in zip(info["chunks"], responses, strict=False):
        prompt = builder.build(info["question"], chunk["text"], memory)
        try:
            g = parse_gate_response(response)
        except ParseError:
            gates = {"parsed": False, "update_gate": None, "exit_gate": None}
        else:
            gates = {"parsed": True, "update_gate": g.update_gate, "exit_gate": g.exit_gate}
            if g.update_gate and TOKENS.count(g.candidate) <= info["budget"]["memory"]:
                memory = g.candidate
        out.append({"user": prompt.user, **gates})
    return out


def export_advantages(turns: list[list[dict]], alpha: float = 0.9) -> list[list[float]]:
    """grumem.core.advantages on the rollouts' rewards, with a null term as the formula's 0."""
    group = [
        ScoredTrajectory(
            "g", tuple((t["t"], t["r_update"]) for t in ts), ts[0]["r_exit"], ts[0]["r_format"]
        )
        for ts in turns
    ]
    table = group_advantages(group, alpha)
    zero = lambda v: 0.0 if v is None else v  # noqa: E731
    return [
        [mix(alpha, zero(a.advantage_traj), zero(a.advantage_turn)) for a in ts] for ts in table
    ]


# --------------------------------------------------------------------- tests


@pytest.mark.slow
@pytest.mark.verl
def test_agent_loop_runs_a_demo_session_with_a_real_model_at_l1_and_l2(seen) -> None:
    loop = seen["loop"]
    ids = loop["token_ids"]
    # llama.cpp's tokenizer and transformers' (both from the GGUF) give the same ids for
    # every prompt, and transformers decodes them back to the text
    assert ids["texts"] == 10 and ids["same_ids"] == 10 and ids["same_text"] == 10
    print(f"llama.cpp's detokenizer gave back {ids['llama_detokenize_same_text']} of 10")
    for level in ("L1", "L2"):
        run = loop[level]
        row, turns = run["row"], run["turns"]
        n = len(row["extra_info"]["chunks"])
        expected = expected_turns(row, [t["response"] for t in turns])
        ends = [i + 1 for i, e in enumerate(expected) if e["parsed"] and e["exit_gate"]]
        # one output per turn; L1 reads every chunk, L2 stops after its first parsed end
        assert len(turns) == (min(ends) if level == "L2" and ends else n)
        for t, (turn, want) in enumerate(zip(turns, expected, strict=True), start=1):
            f = turn["fields"]
            assert f["t"] == t and f["chunk_sha"] == row["extra_info"]["chunks"][t - 1]["chunk_sha"]
            # the prompt's user message is the workflow's for the memory the rules carried
            assert turn["user"] == want["user"]
            assert (f["parsed"], f["update_gate"], f["exit_gate"]) == (
                want["parsed"], want["update_gate"], want["exit_gate"],
            )  # fmt: skip
            assert turn["prompt_is_sent"] and turn["response_is_generated"]
            assert turn["mask_all_generated"]
            assert turn["prompt_tokens"] <= loop["prompt_length"]
        print(f"{level}: {len(turns)} turns in {run['seconds']} s")


@pytest.mark.slow
@pytest.mark.verl
def test_recorded_answers_rebuild_the_recorded_messages_and_rewards(seen) -> None:
    corpus_turns = {}
    for group in seen["replay"]:
        for sample in group["samples"]:
            corpus_turns[sample["trajectory_id"]] = sample
    assert len(corpus_turns) == 20  # 2 queries x 5 sessions x 2 samples
    recorded = read_trajectories(Path(seen["corpus"]))
    for tid, sample in corpus_turns.items():
        record = recorded[tid]
        # byte for byte: the messages the workflow sent, and the answers it got back
        assert sample["users"] == [t["prompt"][-1]["content"] for t in record["turns"]]
        assert sample["responses"] == [t["response"] for t in record["turns"]]
        for got, want in zip(sample["turns"], record["turns"], strict=True):
            assert got["r_update"] == want["r_update"]
            assert (got["r_exit"], got["r_format"]) == (record["r_exit"], record["r_format"])
            for k in ("advantage_traj", "advantage_turn"):
                assert got[k] == (None if want[k] is None else pytest.approx(want[k]))
            if want["advantage"] is not None:
                assert got["advantage"] == pytest.approx(want["advantage"])
        assert sample["turn_scores"] == [t["advantage"] for t in sample["turns"]]


@pytest.mark.slow
@pytest.mark.verl
def test_group_step_values_pass_verls_advantage_step_per_turn(seen) -> None:
    g = seen["group"]
    turns, keys = g["turns"], g["keys"]
    by_rollout: dict[tuple[str, str], list[dict]] = {}
    for key, turn in zip(keys, turns, strict=True):
        uid, session, _ = key.rsplit("_", 2)
        by_rollout.setdefault((uid, session), []).append(turn)
    for uid in ("case0", "case1"):
        rollouts = [by_rollout[uid, s] for s in ("0", "1")]
        want = export_advantages(rollouts)
        assert [[t["advantage"] for t in r] for r in rollouts] == [
            [pytest.approx(v) for v in w] for w in want
        ]
    # through verl: rm_scores hold each turn's advantage; the estimator spreads it over
    # the turn's response tokens (advantages = returns, 0 off the response)
    for turn, score, row in zip(turns, g["rm_score_sums"], g["grumem"], strict=True):
        assert score == pytest.approx(turn["advantage"], abs=1e-6)
        assert row["values"] == [pytest.approx(turn["advantage"], abs=1e-6)]
        assert row["returns_equal"] and row["zero_off_response"]
    # case0 has per-turn values: t=1 differs from t=2 within a rollout
    case0 = [t["advantage"] for k, t in zip(keys, turns, strict=True) if k.startswith("case0_0_")]
    assert case0[0] != pytest.approx(case0[1])
    # stock grpo gives every turn of a rollout one value: per-turn advantages are lost
    grpo0 = [r["values"] for k, r in zip(keys, g["grpo"], strict=True) if k.startswith("case0_0_")]
    assert grpo0[0] == grpo0[1] == grpo0[2]
    # case1: both rollouts alike, a zero-variance group: 0 on every turn, and counted
    case1 = [t for k, t in zip(keys, turns, strict=True) if k.startswith("case1_")]
    assert [t["advantage"] for t in case1] == [0.0] * 4
    assert all(t["group_zero_variance"] for t in case1)
    m = g["metrics"]
    assert (m["training/grumem/groups/total"], m["training/grumem/groups/zero_variance_total"]) == (
        2,
        1,
    )
    assert m == step_metrics(zip(keys, turns, strict=True), "training")


@pytest.mark.slow
@pytest.mark.verl
def test_verls_dataset_loads_the_exported_sessions_and_the_loop_runs_a_row(seen) -> None:
    """The export's own sessions-train.parquet (the demo run's), read by verl's RLHFDataset
    with the data config `grumem verl-config --online` prints: every row kept, each naming the
    `grumem` loop; one row, handed over as verl's worker hands it, runs the loop."""
    import pyarrow.parquet as pq

    d = seen["dataset"]
    sessions = Path(seen["corpus"]) / "sessions-train.parquet"
    rows = pq.read_table(sessions).to_pylist()
    assert d["train_files"] == str(sessions.resolve())
    # the train split: 2 queries x 3 sessions (demo-01, -02, -03), none filtered out
    assert d["rows"] == len(rows) == 6
    assert {r["extra_info"]["split"] for r in rows} == {"train"}
    assert {"agent_name", "extra_info", "raw_prompt", "reward_model"} <= set(d["columns"])
    assert d["agent_names"] == ["grumem"] * 6
    assert d["raw_prompts"] == [r["prompt"] for r in rows]
    assert d["keys"] == [[r["extra_info"]["query_id"], r["extra_info"]["session"]] for r in rows]
    assert d["agent_name"] == "grumem"
    (row,) = [r for r in rows if (r["extra_info"]["query_id"], r["extra_info"]["session"]) == REAL]
    script = GROUP_CASES[0]["scripts"][0]
    want = expected_turns(row, script)
    assert len(d["turns"]) == len(row["extra_info"]["chunks"]) == 3  # L1: every chunk read
    assert [t["user"] for t in d["turns"]] == [w["user"] for w in want]
    assert [t["response"] for t in d["turns"]] == script
    for turn, w, chunk in zip(d["turns"], want, row["extra_info"]["chunks"], strict=True):
        f = turn["fields"]
        assert (f["parsed"], f["update_gate"], f["exit_gate"]) == (
            w["parsed"],
            w["update_gate"],
            w["exit_gate"],
        )
        assert f["chunk_sha"] == chunk["chunk_sha"]
    assert [t["fields"]["label"] for t in d["turns"]] == [
        v == "yes" for v in row["reward_model"]["ground_truth"]
    ]


@pytest.mark.slow
@pytest.mark.verl
def test_the_docs_gpu_command_composes_onto_verls_trainer_config(seen) -> None:
    assert seen["compose"] == {
        "n": 8,
        "prompt_length": 30720,
        "response_length": 2048,
        "agent_loop": "grumem",
        "manager": "grumem.verl.worker.GrumemAgentLoopManager",
        "adv_estimator": "grumem",
        "sampler": "GrumemReplayBuffer",
        "model": "Qwen/Qwen2.5-3B-Instruct",
        "n_gpus": 8,
    }


@pytest.mark.slow
@pytest.mark.verl
def test_v1_rollout_path_on_cpu_ray_transferqueue_sampler(seen) -> None:
    w = seen["worker"]
    assert w["manager_worker_class"] == "GrumemAgentLoopWorker"
    assert w["worker_is_tq_worker"][1] == "AgentLoopWorkerTQ"
    assert w["prompt_status"] == "finished"
    # rollout.n = 2 rollouts of the 3-chunk row at L1: 6 training rows, one per turn
    keys = w["sampled_keys"]
    assert len(keys) == 6 and sorted(k.rsplit("_", 2)[1:] for k in keys) == sorted(
        [s, i] for s in "01" for i in "012"
    )
    turns = w["turns"]
    rollouts = [
        [t for k, t in zip(keys, turns, strict=True) if k.rsplit("_", 2)[1] == s] for s in "01"
    ]
    want = export_advantages(rollouts)
    # the trainer's advantage step over what TransferQueue holds: each turn its own value
    for key, turn, row in zip(keys, turns, w["advantages"], strict=True):
        s, i = key.rsplit("_", 2)[1:]
        assert turn["advantage"] == pytest.approx(want[int(s)][int(i)])
        assert row["values"] == [pytest.approx(turn["advantage"], abs=1e-6)]
    # the sampler put grumem's metrics of the sampled rows in the step's metrics
    metrics = dict(w["metrics"])
    assert metrics.pop("training/grumem/rows_dropped_total") == 0
    assert metrics == pytest.approx(step_metrics(zip(keys, turns, strict=True), "training"))
    assert w["metrics"]["training/grumem/parse_rate/mean"] == 1.0
    # each turn's training row keeps the chunk shas, not the texts
    row = read_rollout_row(
        [
            r
            for r in demo_rollout_rows()
            if (r["extra_info"]["query_id"], r["extra_info"]["session"]) == REAL
        ][0]
    )
    assert w["stored_chunk_texts"] == 0
    assert w["stored_chunk_shas"] == [[c.chunk_sha for c in row.chunks]] * 6
    sizes = w["row_bytes"]
    assert sizes["chunks_200_without_texts"] * 50 < sizes["chunks_200"]
    print(f"a training row's extra_info: {sizes}")


@pytest.mark.slow
@pytest.mark.verl
def test_a_failed_group_is_evicted_and_refilled_and_a_row_over_budget_dropped_once(seen) -> None:
    """The over-budget row fails (both rollouts, at t=1, before any generation); the
    sampler evicts its group and has a row drawn in its place, though verl hands a custom
    sampler no refill setting. The refill draws the same row again: it fails at once
    without a rollout and is refilled again, by the good row, whose group is the batch.
    The dropped row is reported once, with its id, and counted."""
    r = seen["worker"]["refill"]
    assert r["submitted"] == ["bad", "bad", "good"]
    assert r["server_rollouts"] == 2  # the good row's two rollouts; none of the bad row's
    assert r["sampled_rows"] == ["demo/" + "/".join(REAL)]
    assert len(r["sampled_keys"]) == 6  # 2 rollouts x 3 turns: the batch is whole
    assert r["metrics"]["training/rollout_failure/evicted_samples"] == 2
    assert r["metrics"]["training/grumem/rows_dropped_total"] == 1
    bad = "demo/" + "/".join(OVER_BUDGET)
    reported = [w for w in r["warnings"] if bad in w]
    assert len(reported) == 1, r["warnings"]
    assert "dropped from train" in reported[0] and "TurnBudgetError" in reported[0]
    assert "section" in reported[0]
    # when every row left is dropped, the run stops saying so instead of drawing forever
    error = r["all_dropped_error"]
    assert error is not None and "every train row left is dropped (1 rows" in error
    assert r["all_dropped_draws"] < 10
