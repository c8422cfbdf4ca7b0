"""grumem.verl.embedded and grumem.verl.cpu_model without verl: the overrides, the
environment and the model folder of the embedded CPU backend (tests/verl/test_training.py
holds the whole command, tests/verl/test_verl_cpu.py runs the trainer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grumem.errors import EmbeddedTrainError
from grumem.verl import embedded
from grumem.verl.cpu_model import model_dir


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def test_cpu_overrides_name_the_cpu_seams_and_refuse_an_unknown_grammar() -> None:
    cpu = embedded.cpu_overrides(embedded.CpuSettings(grammar="gate", token_budget=3000))
    for want in (
        "actor_rollout_ref.rollout.name=grumem_cpu",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "+actor_rollout_ref.rollout.engine_kwargs.grumem_cpu.grammar=gate",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=3000",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "+ray_kwargs.ray_init.num_gpus=1",
    ):
        assert want in cpu, want
    no_grammar = embedded.cpu_overrides(embedded.CpuSettings())
    assert "+actor_rollout_ref.rollout.engine_kwargs.grumem_cpu.grammar=null" in no_grammar
    with pytest.raises(EmbeddedTrainError, match="grammar 'json'"):
        embedded.cpu_overrides(embedded.CpuSettings(grammar="json"))


def test_environment_names_the_plugin_once_and_keeps_other_modules(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "VERL_USE_EXTERNAL_MODULES": "mine.plugin"}
    env = embedded.cpu_environment(threads=3, base=base)
    assert env["VERL_USE_EXTERNAL_MODULES"] == "mine.plugin,grumem.verl.plugin"
    again = embedded.cpu_environment(base=env)
    assert again["VERL_USE_EXTERNAL_MODULES"] == "mine.plugin,grumem.verl.plugin"
    assert (env["VERL_PLATFORM"], env["OMP_NUM_THREADS"]) == ("cpu", "3")
    assert env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert env["PATH"] == "/bin"


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
