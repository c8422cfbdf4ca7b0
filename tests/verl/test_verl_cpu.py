"""The embedded CPU training backend (grumem.verl.plugin and its parts), in .venv-verl:
verl's own trainer, `python -m verl.trainer.main_ppo`, takes real GRPO steps with
grumem's online loop on this machine, run by `snakemake train`.

- its private touch points of verl are the ones grumem.verl.private names, in the
  shape written there, and another verl is refused;
- verl's own registries find the platform, the FSDP engine for `cpu`, the rollout
  replica and adapter, and verl's own process-group function makes a gloo group;
- the rollout server batches concurrent requests, answers the log-probs a full
  forward of the same weights gives, defaults max_tokens to the response length,
  and under the gate grammar answers what the strict parser accepts;
- `snakemake train` on the demo (its exported corpus, the split files cut to one
  row of 3 chunks to train on, one of 2 to validate on): both steps complete with
  finite policy loss and grad norm, on-policy (rollout_probs_diff_max < 1e-3),
  answers parsed under the grammar, a checkpoint whose weights transformers loads
  and training moved, a second run that continues from it at step 3, its inputs
  left as they were, and per-turn advantages that differ within one trajectory in
  verl's own rollout dump.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from grumem.core.gate_parser import ParseError, parse_gate_response
from grumem.verl import embedded
from grumem.verl.cpu_model import model_dir
from support.rollout_rows import read_rows, write_rows
from support.verl_venv import exported_demo_corpus, samples2_loop, smollm2_gguf
from support.workflow import REPO, demo_project, snakemake, write_config

VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"
CHECK = Path(__file__).parents[1] / "support" / "verl_cpu_check.py"


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
    env = embedded.cpu_environment(base=home["env"])
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


def small_splits(corpus: Path) -> dict[str, str]:
    """The exported corpus's split files made as cheap as a test affords: one row of the
    training split cut to its first 3 chunks, and one row of the validation split cut
    to 2 (the rows' own labels, texts and shas; t_last_evidence recounted). The sha256
    of each, to show that training leaves them as they were."""
    for split, chunks in (("train", 3), ("val", 2)):
        path = corpus / f"sessions-{split}.parquet"
        (row,) = [r for r in read_rows(path) if len(r["extra_info"]["chunks"]) >= chunks][:1]
        info = dict(row["extra_info"], chunks=row["extra_info"]["chunks"][:chunks], index=0)
        labels = row["reward_model"]["ground_truth"][:chunks]
        evidence = [t for t, v in enumerate(labels, start=1) if v == "yes"]
        info["t_last_evidence"] = evidence[-1] if evidence else None
        row = {
            **row,
            "extra_info": info,
            "reward_model": {**row["reward_model"], "ground_truth": labels},
        }
        write_rows(path, [row])
    return split_digests(corpus)


def train_config(work: Path, model: Path, steps: int) -> None:
    """The demo's config with its train section at the test's sizes."""
    demo = yaml.safe_load((REPO / "config.yaml").read_text())["projects"]["demo"]
    train = {
        **demo["train"],
        "steps": steps,
        "model": str(model),
        "save_freq": 2,
        "test_freq": 2,
        # verl's dump of each step's training rows: each turn's answer and score
        "overrides": [f"trainer.rollout_data_dir={work / 'rollouts'}"],
    }
    write_config(
        work,
        None,
        projects={"demo": {**demo_project(), "train": train}},
        loop=samples2_loop(),
    )


@pytest.mark.slow
@pytest.mark.verl
def test_snakemake_train_takes_grpo_steps_checkpoints_and_resumes(
    home, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`snakemake train` on the demo's train: section (2 steps of one row, 2 rollouts,
    answers of up to 64 tokens under the gate grammar), then one more step resumed from
    its checkpoint."""
    work = tmp_path_factory.mktemp("train")
    corpus = exported_demo_corpus(work, tmp_path_factory)
    inputs = small_splits(corpus)
    train_config(work, home["model"], steps=2)
    out = work / "results/demo/train"
    started = time.monotonic()
    snakemake(work, "train", env=home["env"])
    seconds = time.monotonic() - started
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        m = s["data"]
        assert math.isfinite(m["actor/pg_loss"]) and math.isfinite(m["actor/grad_norm"])
        # the server's log-probs are the actor's: on-policy
        assert m["training/rollout_probs_diff_max"] < 1e-3
    first = steps[0]["data"]
    turns = rollout_turns(work / "rollouts" / "1.jsonl")
    parsed = sum(is_parsed(t["output"]) for t in turns) / len(turns)
    assert parsed == pytest.approx(first["training/grumem/parse_rate/mean"])
    assert parsed > 0.5
    assert first["actor/grad_norm"] > 0
    # validation ran on the held-out split, at the last step
    assert "val-core/grumem/reward/mean@1" in steps[1]["data"]
    # the checkpoint of step 2 loads, and training moved its weights
    hf = out / "checkpoints/global_step_2/actor/huggingface"
    moved = check("weights", {"before": str(home["model"]), "after": str(hf)}, home["env"], work)
    assert moved["same_names"] and moved["tensors_changed"] > 0 and moved["max_abs_change"] > 0
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["data"]["train_files"] == str(corpus.resolve() / "sessions-train.parquet")
    assert config["data"]["val_files"] == str(corpus.resolve() / "sessions-val.parquet")
    assert "verl.trainer.main_ppo" in (out / "command.txt").read_text()
    report(steps, seconds)

    # one step more: the run continues from the checkpoint of step 2
    train_config(work, home["model"], steps=3)
    started = time.monotonic()
    snakemake(work, "train", env=home["env"])
    resumed_seconds = time.monotonic() - started
    log = (work / "logs/train/demo.log").read_text()
    assert "resuming from the checkpoint of step 2" in log
    again = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in again] == [1, 2, 3] and again[:2] == steps
    assert (out / "checkpoints/global_step_3/actor/huggingface/config.json").is_file()
    assert split_digests(corpus) == inputs  # the rule's inputs, as they were
    # per-turn values reach verl's batch: in some trajectory, turns differ (a turn's
    # term moves when the rollouts' r_update agree at one t and not at another)
    by_rollout: dict[str, list[float]] = {}
    for step in (1, 2, 3):
        for t in rollout_turns(work / "rollouts" / f"{step}.jsonl"):
            uid, session, _ = t["uid"].rsplit("_", 2)
            by_rollout.setdefault(f"{step}/{uid}/{session}", []).append(t["score"])
    assert any(len(set(v)) > 1 for v in by_rollout.values()), by_rollout
    print(f"the resumed run (step 3): {resumed_seconds:.0f} s")
    report(again[2:], resumed_seconds)


def split_digests(corpus: Path) -> dict[str, str]:
    import hashlib

    return {
        split: hashlib.sha256((corpus / f"sessions-{split}.parquet").read_bytes()).hexdigest()
        for split in ("train", "val")
    }


def report(steps: list[dict], seconds: float) -> None:
    print(f"{len(steps)} step(s) in {seconds:.0f} s with Ray's start-up and the model's init")
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
