"""The embedded training backend: verl's own trainer (`python -m verl.trainer.main_ppo`)
with grumem's online loop on this CPU machine, as the embedded llama.cpp server is
the workflow's default LLM (`train: {backend: embedded}`, grumem.verl.training).

`cpu_overrides` gives the settings that make verl 0.9.1's v1 trainer run without a
GPU (each measured; see docs/verl.md, "The embedded backend"), `cpu_environment`
the environment (the platform plug-in above all). This module imports no verl: a
caller in the workflow's venv builds the command and runs it with the interpreter
that has verl.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from grumem.errors import EmbeddedTrainError

PLUGIN = "grumem.verl.plugin"
ROLLOUT = "grumem_cpu"  # grumem.verl.plugin.ROLLOUT_NAME (named here without verl)
GRAMMARS = ("gate", "judge")


@dataclass(frozen=True)
class CpuSettings:
    """What only a CPU run is sized by."""

    grammar: str | None = None  # draw answers under this grammar (gate): see cpu_rollout
    # ppo_max_token_len_per_gpu: tokens a micro-batch; the logits alone are 4 x 49,152
    # bytes a token for SmolLM2, and 4096 tokens took the update past 9 GB
    token_budget: int = 2048
    threads: int = 2  # torch threads of each process that computes


def cpu_overrides(settings: CpuSettings) -> list[str]:
    """The Hydra overrides of a CPU run (not shell-quoted)."""
    s = settings
    if s.grammar is not None and s.grammar not in GRAMMARS:
        raise EmbeddedTrainError(f"grammar {s.grammar!r}: one of {', '.join(GRAMMARS)}, or none")
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    return [
        # flash attention (verl's default) needs a GPU; torch's sdpa runs anywhere
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        # recomputing activations costs time and 135M parameters' activations fit
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        # verl packs a micro-batch's rows into one sequence, which sdpa attends with a
        # block mask over the whole pack; rows padded to the longest are less work here
        "actor_rollout_ref.model.use_remove_padding=False",
        # FSDP1 syncs module states from a GPU; FSDP2 runs on gloo
        f"{actor}.strategy=fsdp2",
        f"{actor}.fsdp_config.strategy=fsdp2",
        f"{actor}.fsdp_config.use_torch_compile=False",
        *(
            f"+{actor}.fsdp_config.mixed_precision.{k}_dtype=fp32"
            for k in ("param", "reduce", "buffer")
        ),
        f"{actor}.use_dynamic_bsz=True",
        f"{actor}.ppo_max_token_len_per_gpu={s.token_budget}",
        f"{rollout}.log_prob_use_dynamic_bsz=True",
        f"{rollout}.log_prob_max_token_len_per_gpu={s.token_budget}",
        f"{rollout}.name={ROLLOUT}",
        f"{rollout}.mode=async",
        f"{rollout}.tensor_model_parallel_size=1",  # one process serves a replica
        f"{rollout}.calculate_log_probs=True",  # the server's log-probs: rollout_probs_diff
        f"{rollout}.agent.num_workers=1",
        f"+{rollout}.engine_kwargs.{ROLLOUT}.grammar={s.grammar or 'null'}",
        "data.dataloader_num_workers=0",
        "reward.num_workers=1",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "trainer.device=cpu",
        # one logical GPU: verl's resource pools ask Ray for an accelerator a process
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "ray_kwargs.ray_init.num_cpus=16",
        "+ray_kwargs.ray_init.num_gpus=1",
        "+ray_kwargs.ray_init.include_dashboard=False",
    ]


def cpu_environment(threads: int = 2, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a CPU run: `base` (default this process's) with the platform
    plug-in, offline model hubs, bounded threads and Ray on loopback."""
    env = dict(os.environ if base is None else base)
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(
        [*modules, PLUGIN] if PLUGIN not in modules else modules
    )
    env["VERL_PLATFORM"] = "cpu"
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["RAY_DISABLE_USAGE_STATS"] = "1"
    # Ray starts its workers at nice 15: beside any other job on the machine the
    # trainer's processes would get a sliver of the cores (measured: 57% of the CPU
    # time niced while the update ran among other jobs); 0 gives them a fair share
    env["RAY_worker_niceness"] = "0"
    # Ray's single-node mode: the node's address is loopback, so Ray's and
    # TransferQueue's sockets bind 127.0.0.1, never the machine's address
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    return env
