"""The embedded CPU training backend (grumem.verl.plugin and its parts), in .venv-verl:
verl's own trainer, `python -m verl.trainer.main_ppo`, takes real GRPO steps with
grumem's online loop on this machine.

- its private touch points of verl are the ones grumem.verl.private names, in the
  shape written there, and another verl is refused;
- verl's own registries find the platform, the FSDP engine for `cpu`, the rollout
  replica and adapter, and verl's own process-group function makes a gloo group;
- the rollout server batches concurrent requests, answers the log-probs a full
  forward of the same weights gives, defaults max_tokens to the response length,
  and under the gate grammar answers what the strict parser accepts;
- verl's trainer with grumem's agent loop on a demo row exported by the workflow:
  both steps complete, finite policy loss and grad norm, on-policy
  (rollout_probs_diff_max < 1e-3), answers parsed under the grammar, and per-turn
  advantages that differ within one trajectory in verl's own rollout dump.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from grumem.core.gate_parser import ParseError, parse_gate_response
from grumem.verl import embedded
from grumem.verl.cpu_model import model_dir
from support.verl_venv import exported_demo_corpus, smollm2_gguf
from support.workflow import REPO

VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"
CHECK = Path(__file__).parents[1] / "support" / "verl_cpu_check.py"
GRUMEM = str(Path(sys.executable).with_name("grumem"))
SESSION = "demo-03-npm-peer-deps"  # the demo's shortest session: 3 chunks
RESPONSE_TOKENS = 64


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A HOME of its own (every cache Ray, verl and transformers keep), and the demo's
    model converted into it."""
    assert VERL_PYTHON.exists(), f"{VERL_PYTHON} does not exist: make it with `make venv-verl`"
    root = tmp_path_factory.mktemp("cpu")
    (root / "tmp").mkdir()
    env = {
        **os.environ,
        "HOME": str(root),
        "HF_HOME": str(root / "hf"),
        "TMPDIR": str(root / "tmp"),
        # Ray's session directory holds Unix sockets (at most 107 bytes a path): a short one
        "RAY_TMPDIR": str(tmp_path_factory.mktemp("r")),
    }
    started = time.monotonic()
    model = model_dir(smollm2_gguf(), cache=root / "models", python=str(VERL_PYTHON))
    print(f"the demo's GGUF converted to an HF folder in {time.monotonic() - started:.1f} s")
    return {"root": root, "env": env, "model": model}


def check(job: str, spec: dict, env: dict[str, str], cwd: Path) -> dict:
    spec_path = cwd / f"{job}.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    proc = subprocess.run(
        [str(VERL_PYTHON), str(CHECK), job, str(spec_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.verl
def test_private_touch_points_are_verl_0_9_1s_and_another_verl_is_refused(home) -> None:
    seen = check("pins", {}, home["env"], home["root"])
    assert seen["verl"] == seen["pinned"] == "0.9.1"
    assert ["vllm", "async"] in seen["registry_keys"]
    assert seen["get_rollout_class_reads_it"]
    for name, f in seen["functions"].items():
        assert f["builds_cpu_gloo_string"], name
    assert "backend" in seen["functions"]["initialize_global_process_group_ray"]["parameters"]
    assert all(seen["from_imports"].values()), seen["from_imports"]
    assert "verl 0.0.0 is installed" in seen["refused"] and "verl==0.9.1" in seen["refused"]


@pytest.mark.slow
@pytest.mark.verl
def test_verls_registries_find_the_cpu_platform_engine_replica_and_gloo(home) -> None:
    env = embedded.cpu_environment(home["root"], base=home["env"])
    seen = check("registries", {}, env, home["root"])
    assert "cpu" in seen["registered"]
    assert seen["platform"] == "grumem.verl.cpu_platform.CpuPlatform"
    assert (seen["device"], seen["collectives"], seen["ray_resource"]) == ("cpu", "gloo", "GPU")
    assert seen["empty_cache"] and 0 < seen["mem_free_total"][0] <= seen["mem_free_total"][1]
    assert seen["engine"] == "verl.workers.engine.fsdp.transformer_impl.FSDPEngineWithLMHead"
    assert seen["replica"] == "grumem.verl.cpu_rollout.CpuReplica"
    assert seen["adapter"] == "grumem.verl.cpu_rollout.CpuRolloutAdapter"
    # verl's own initialize_global_process_group_ray, as its training worker calls it
    assert seen["process_group_backend"] == "gloo"


@pytest.mark.slow
@pytest.mark.verl
def test_rollout_server_batches_requests_and_answers_the_policys_log_probs(home) -> None:
    spec = {"model": str(home["model"]), "rows": 3, "response_length": 48, "max_tokens": 16}
    spec["out"] = str(home["root"] / "server")
    seen = check("server", spec, home["env"], home["root"])
    for grammar in ("None", "gate"):
        run = seen[grammar]
        # three requests sent at once: one batch
        assert run["stats"]["batches"] == 1 and run["stats"]["requests"] == 3
        first, second, capped = run["answers"]
        # no max_tokens: up to the response length; given: at most that many
        for a in (first, second):
            assert a["ends_with_stop"] or a["tokens"] == 48, a
        assert capped["tokens"] <= 16
        for a in run["answers"]:
            # the log-probs of the same weights in one full forward, as verl's actor does
            assert a["log_prob_gap"] < 1e-3, a
        print(f"grammar {grammar}: {run['seconds']} s, {run['stats']}")
    # under the gate grammar every answer that ended is in the strict parser's shape
    for a in seen["gate"]["answers"][:2]:
        assert not a["ends_with_stop"] or a["parsed"], a
    assert any(a["parsed"] for a in seen["gate"]["answers"][:2])


def demo_rows(corpus: Path, out: Path) -> Path:
    """The exported sessions.parquet's rows of the demo's shortest session, as they are."""
    table = pq.read_table(corpus / "sessions.parquet")
    keep = [
        i
        for i, info in enumerate(table.column("extra_info").to_pylist())
        if info["session"] == SESSION
    ]
    out.mkdir()
    pq.write_table(table.take(keep[:1]), out / "sessions.parquet")
    return out


def verl_config(*args: str) -> list[str]:
    proc = subprocess.run(
        [GRUMEM, "verl-config", *args], capture_output=True, text=True, check=True
    )
    return shlex.split(proc.stdout)


@pytest.mark.slow
@pytest.mark.verl
def test_verls_trainer_takes_two_grpo_steps_with_grumems_loop_on_cpu(
    home, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path_factory.mktemp("train")
    corpus = demo_rows(exported_demo_corpus(work, tmp_path_factory), work / "rows")
    out = work / "out"
    out.mkdir()
    settings = embedded.CpuSettings(
        steps=2, batch=1, rollouts=2, max_response_tokens=RESPONSE_TOKENS, grammar="gate", lr=1e-5
    )
    argv = embedded.command(
        corpus,
        home["model"],
        out,
        settings,
        extra=[f"trainer.rollout_data_dir={out / 'rollouts'}"],
        python=str(VERL_PYTHON),
    )
    # the online part is what `grumem verl-config --online` prints for the same corpus
    online = verl_config(
        "--online", "--corpus", str(corpus), "--rollout-n", "2",
        "--max-prompt-length", str(settings.max_prompt_tokens),
        "--max-response-length", str(RESPONSE_TOKENS),
    )  # fmt: skip
    assert argv[3 : 3 + len(online)] == online
    env = embedded.cpu_environment(out, base=home["env"])
    started = time.monotonic()
    with open(out / "trainer.log", "w") as log:
        code = embedded.run(argv, env, out, log)
    seconds = time.monotonic() - started
    assert code == 0, (out / "trainer.log").read_text()[-6000:]
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        m = s["data"]
        assert math.isfinite(m["actor/pg_loss"]) and math.isfinite(m["actor/grad_norm"])
        # the server's log-probs are the actor's: on-policy
        assert m["training/rollout_probs_diff_max"] < 1e-3
    first = steps[0]["data"]
    turns = rollout_turns(out / "rollouts" / "1.jsonl")
    parsed = sum(is_parsed(t["output"]) for t in turns) / len(turns)
    assert parsed == pytest.approx(first["training/grumem/parse_rate/mean"])
    assert parsed > 0.5
    # per-turn values reach verl's batch: in some trajectory, turns differ
    by_rollout: dict[str, list[float]] = {}
    for step in (1, 2):
        for t in rollout_turns(out / "rollouts" / f"{step}.jsonl"):
            uid, session, _ = t["uid"].rsplit("_", 2)
            by_rollout.setdefault(f"{step}/{uid}/{session}", []).append(t["score"])
    assert any(len(set(v)) > 1 for v in by_rollout.values()), by_rollout
    print(f"2 steps in {seconds:.0f} s")
    for s in steps:
        m = s["data"]
        print(
            f"step {s['step']}: parse rate {m['training/grumem/parse_rate/mean']:.2f},"
            f" grad_norm {m['actor/grad_norm']:.3f}, pg_loss {m['actor/pg_loss']:.4f},"
            f" rollout_probs_diff_max {m['training/rollout_probs_diff_max']:.2e},"
            f" zero-variance groups {m['training/grumem/groups/zero_variance_total']:.0f}"
            f" of {m['training/grumem/groups/total']:.0f}, {m['perf/total_num_tokens']} tokens;"
            f" { ({k[9:]: round(v, 1) for k, v in m.items() if k.startswith('timing_s/')}) }"
        )


def rollout_turns(path: Path) -> list[dict]:
    """verl's dump of a step's training rows: each turn's key, answer and score (the
    rm_scores the grumem estimator spreads: the turn's advantage)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def is_parsed(text: str) -> bool:
    try:
        parse_gate_response(text)
    except ParseError:
        return False
    return True
