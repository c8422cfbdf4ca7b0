"""grumem.verl.training without verl: the trainer's command for a `train:` section, the
resume rule and the metrics kept across runs (tests/verl/test_verl_cpu.py runs it)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from grumem.errors import GrumemError, TrainPlanError
from grumem.verl import training
from grumem.verl.training import TrainSettings, override_key, trainer_run
from support.rollout_rows import demo_rollout_rows, write_split_files

PYTHON = "/venv-verl/bin/python"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    # 3 sessions to train on (6 rows, 30 chunks), 2 held out
    return write_split_files(tmp_path / "corpus", demo_rollout_rows())


def run_of(files: dict[str, Path], out: Path, **settings) -> training.TrainerRun:
    return trainer_run(
        TrainSettings(**settings), files["train"], files["val"], "/m", out, "demo", PYTHON, {}
    )


def values(run: training.TrainerRun) -> dict[str, str]:
    keys = [override_key(o) for o in run.overrides]
    assert len(keys) == len(set(keys)), "a key given twice"
    return {override_key(o): o.split("=", 1)[1] for o in run.overrides}


def test_embedded_defaults_and_the_section_reach_the_trainer(files, tmp_path) -> None:
    out = tmp_path / "my train"
    run = run_of(files, out, batch=2, rollouts=2, lr=1e-5, grammar="gate", steps=3)
    assert run.argv[:3] == [PYTHON, "-m", "verl.trainer.main_ppo"]
    v = values(run)
    assert v["data.train_files"] == str(files["train"].resolve())
    assert v["data.val_files"] == str(files["val"].resolve())
    assert v["data.train_batch_size"] == "2"
    # one optimiser step a step: 2 sessions rows x 5 turns, counted by verl in turn rows
    assert v["actor_rollout_ref.actor.ppo_mini_batch_size"] == "10"
    assert v["actor_rollout_ref.rollout.n"] == "2"
    assert v["actor_rollout_ref.actor.optim.lr"] == "1e-05"
    assert v["actor_rollout_ref.actor.use_kl_loss"] == "False"
    # a CPU step's lengths, and a micro-batch of at least a whole turn row
    assert (v["data.max_prompt_length"], v["data.max_response_length"]) == ("2048", "128")
    assert v["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == "2176"
    assert v["actor_rollout_ref.rollout.name"] == "grumem_cpu"
    assert v["actor_rollout_ref.rollout.engine_kwargs.grumem_cpu.grammar"] == "gate"
    assert v["trainer.total_training_steps"] == "3"
    # an epoch is 6 // 2 = 3 steps: a checkpoint and a validation once an epoch
    assert (v["trainer.save_freq"], v["trainer.test_freq"]) == ("3", "3")
    assert v["trainer.logger"] == "[console,file]"
    assert v["trainer.v1.sampler.sync_refill_failed_groups"] == "True"
    assert v["trainer.resume_mode"] == "auto"
    assert v["trainer.default_local_dir"] == f"'{out.resolve() / 'checkpoints'}'"  # a space
    assert "hf_model" in v["actor_rollout_ref.actor.checkpoint.save_contents"]
    assert run.env["VERL_FILE_LOGGER_PATH"] == str(
        out.resolve() / "checkpoints" / ".metrics-run.jsonl"
    )
    assert run.assigned["VERL_PLATFORM"] == "cpu" and run.assigned["WANDB_MODE"] == "disabled"
    # steps default to one pass over the training rows
    assert values(run_of(files, out, batch=2))["trainer.total_training_steps"] == "3"


def test_the_sections_overrides_win_in_the_place_of_the_first(files, tmp_path) -> None:
    extra = ("actor_rollout_ref.actor.optim.lr=3e-6", "trainer.rollout_data_dir=/r")
    run = run_of(files, tmp_path, overrides=extra, kl=0.01, level="L2")
    keys = [override_key(o) for o in run.overrides]
    v = values(run)
    assert v["actor_rollout_ref.actor.optim.lr"] == "3e-6"
    assert keys.index("actor_rollout_ref.actor.optim.lr") < keys.index("trainer.val_before_train")
    assert run.overrides[-1] == "trainer.rollout_data_dir=/r"
    assert v["actor_rollout_ref.actor.kl_loss_coef"] == "0.01"
    assert v["actor_rollout_ref.actor.use_kl_loss"] == "True"
    assert v["grumem_level"] == "L2"


def test_gpu_backends_use_verls_rollout_servers(files, tmp_path) -> None:
    run = run_of(files, tmp_path, backend="vllm", gpus=8, nodes=2, ray_address="10.0.0.1:6379")
    v = values(run)
    assert v["actor_rollout_ref.rollout.name"] == "vllm"
    assert (v["trainer.n_gpus_per_node"], v["trainer.nnodes"]) == ("8", "2")
    assert v["ray_kwargs.ray_init.address"] == "10.0.0.1:6379"
    # the rows' budget: 32768 - 2048
    assert (v["data.max_prompt_length"], v["data.max_response_length"]) == ("30720", "2048")
    assert "VERL_PLATFORM" not in run.env and "trainer.device" not in v
    with pytest.raises(TrainPlanError, match="grammar gate: the embedded backend"):
        run_of(files, tmp_path, backend="sglang", grammar="gate")


def test_a_batch_over_the_training_rows_is_refused_naming_both(files, tmp_path) -> None:
    with pytest.raises(TrainPlanError) as e:
        run_of(files, tmp_path, batch=7)
    assert f"batch 7 sessions rows a step is more than the 6 rows of {files['train']}" in str(
        e.value
    )


def test_command_text_reruns_the_trainer_by_hand(files, tmp_path) -> None:
    out = tmp_path / "a b"
    run = run_of(files, out)
    text = training.command_text(run, out)
    line = text.splitlines()[-1]
    words = shlex.split(line)
    assert words[:3] == ["cd", str(out), "&&"]
    at = words.index(PYTHON)
    assert dict(w.split("=", 1) for w in words[3:at]) == run.assigned
    assert words[at:] == run.argv


def checkpoint(checkpoints: Path, step: int, state: dict) -> None:
    (checkpoints / f"global_step_{step}").mkdir(parents=True)
    (checkpoints / training.LATEST).write_text(str(step))
    (checkpoints / training.RUN_STATE).write_text(json.dumps(state))


def test_resume_continues_only_from_checkpoints_of_the_same_run(files, tmp_path) -> None:
    checkpoints = tmp_path / "checkpoints"
    run = run_of(files, tmp_path, batch=1, steps=3)
    assert training.resume_step(run, checkpoints, resume=True) == 0
    checkpoint(checkpoints, 2, run.state)
    assert training.resume_step(run, checkpoints, resume=True) == 2
    # more steps, other frequencies and loggers: the same run, continued
    longer = run_of(files, tmp_path, batch=1, steps=5, save_freq=1, test_freq=2, logger=["x"])
    assert training.resume_step(longer, checkpoints, resume=True) == 2
    other = run_of(files, tmp_path, batch=1, steps=3, lr=1e-5)
    with pytest.raises(GrumemError) as e:
        training.resume_step(other, checkpoints, resume=True)
    assert "actor_rollout_ref.actor.optim.lr=1e-06 -> actor_rollout_ref.actor.optim.lr=1e-05" in (
        str(e.value)
    )
    assert "resume: false" in str(e.value)
    shorter = run_of(files, tmp_path, batch=1, steps=1)
    with pytest.raises(GrumemError, match="of step 2, after train.steps 1"):
        training.resume_step(shorter, checkpoints, resume=True)
    # other files: refused too
    write_split_files(tmp_path / "corpus", demo_rollout_rows()[1:])  # one row fewer
    with pytest.raises(GrumemError, match="train_sha256 changed"):
        training.resume_step(run_of(files, tmp_path, batch=1, steps=3), checkpoints, resume=True)
    # resume: false starts over, the old checkpoints removed
    assert training.resume_step(other, checkpoints, resume=False) == 0
    assert not checkpoints.exists()


def test_a_resumed_runs_metrics_hold_every_step(tmp_path) -> None:
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    first = [{"step": s, "data": {"a": s}} for s in (1, 2, 3)]
    (checkpoints / training.LATEST).write_text("2")  # step 3 was not saved
    training.keep_history(checkpoints, first)
    history = training.read_history(checkpoints)
    assert history == first[:2]
    resumed = [{"step": s, "data": {"a": 10 * s}} for s in (3, 4)]
    merged = training.merged_steps(history, resumed, resumed_from=2)
    assert [m["data"]["a"] for m in merged] == [1, 2, 30, 40]
