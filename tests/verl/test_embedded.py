"""grumem.verl.embedded and grumem.verl.cpu_model without verl: the command line, the
environment and the model folder of the embedded CPU backend, as `grumem verl-cpu
--print` shows them (tests/verl/test_verl_cpu.py runs the trainer)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from grumem.errors import EmbeddedTrainError
from grumem.verl import embedded
from grumem.verl.cpu_model import model_dir
from grumem.verl.online_overrides import online_overrides
from support.rollout_rows import demo_rollout_rows, write_rows

GRUMEM = str(Path(sys.executable).with_name("grumem"))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "sessions.parquet", demo_rollout_rows()[:2])


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def test_command_is_grumems_online_overrides_then_the_cpu_settings_then_extra(
    corpus: Path, model: Path, tmp_path: Path
) -> None:
    settings = embedded.CpuSettings(rollouts=3, max_response_tokens=96, grammar="gate")
    argv = embedded.command(corpus, model, tmp_path, settings, ["trainer.save_freq=1"], "py")
    online = online_overrides(corpus, rollout_n=3, max_prompt_length=2048, max_response_length=96)
    assert argv[:3] == ["py", "-m", "verl.trainer.main_ppo"]
    assert argv[3 : 3 + len(online)] == [shlex.split(o)[0] for o in online]
    assert argv[-1] == "trainer.save_freq=1"  # extra last: Hydra's last value wins
    cpu = argv[3 + len(online) : -1]
    assert cpu == embedded.cpu_overrides(model, settings, tmp_path)
    for want in (
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.name=grumem_cpu",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "+actor_rollout_ref.rollout.engine_kwargs.grumem_cpu.grammar=gate",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "trainer.v1.sampler.sync_refill_failed_groups=True",
        "trainer.n_gpus_per_node=1",
        "+ray_kwargs.ray_init.num_gpus=1",
        "trainer.logger=[console,file]",
        f"trainer.default_local_dir={tmp_path / 'checkpoints'}",
    ):
        assert want in cpu, want
    no_grammar = embedded.cpu_overrides(model, embedded.CpuSettings(), tmp_path)
    assert "+actor_rollout_ref.rollout.engine_kwargs.grumem_cpu.grammar=null" in no_grammar
    with pytest.raises(EmbeddedTrainError, match="grammar 'json'"):
        embedded.cpu_overrides(model, embedded.CpuSettings(grammar="json"), tmp_path)


def test_environment_names_the_plugin_once_and_keeps_other_modules(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "VERL_USE_EXTERNAL_MODULES": "mine.plugin"}
    env = embedded.cpu_environment(tmp_path, threads=3, base=base)
    assert env["VERL_USE_EXTERNAL_MODULES"] == "mine.plugin,grumem.verl.plugin"
    again = embedded.cpu_environment(tmp_path, base=env)
    assert again["VERL_USE_EXTERNAL_MODULES"] == "mine.plugin,grumem.verl.plugin"
    assert (env["VERL_PLATFORM"], env["WANDB_MODE"], env["OMP_NUM_THREADS"]) == (
        "cpu",
        "disabled",
        "3",
    )
    assert env["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "metrics.jsonl")
    assert env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert env["PATH"] == "/bin" and "PATH" not in embedded.ENVIRONMENT_KEYS


def test_model_dir_takes_an_hf_folder_as_it_is_and_refuses_others(
    model: Path, tmp_path: Path
) -> None:
    assert model_dir(model) == model.resolve()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EmbeddedTrainError, match="no config.json"):
        model_dir(empty)
    with pytest.raises(EmbeddedTrainError, match="no such model"):
        model_dir(tmp_path / "missing.gguf")


def test_verl_cpu_print_shows_the_environment_then_the_trainer_command(
    corpus: Path, model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [GRUMEM, "verl-cpu", "--corpus", str(corpus), "--out", str(out), "--model", str(model)]
        + ["--grammar", "gate", "--print", "trainer.save_freq=1"],
        capture_output=True,
        text=True,
        check=True,
    )
    words = shlex.split(proc.stdout)
    assert words[0] == f"VERL_FILE_LOGGER_PATH={out / 'metrics.jsonl'}"
    assert "VERL_USE_EXTERNAL_MODULES=grumem.verl.plugin" in words
    at = words.index("-m")
    assert words[at - 1] == sys.executable and words[at + 1] == "verl.trainer.main_ppo"
    assert words[-1] == "trainer.save_freq=1"
    assert f"data.train_files={corpus.resolve()}" in words
    assert not out.exists()  # printing runs nothing
