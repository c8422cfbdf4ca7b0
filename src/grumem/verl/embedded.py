"""The embedded training backend: verl's own trainer (`python -m verl.trainer.main_ppo`)
with grumem's online loop on this CPU machine, as the embedded llama.cpp server is
the workflow's default LLM.

`cpu_overrides` gives the settings that make verl 0.9.1's v1 trainer run without a
GPU (each measured; see docs/verl.md, "The embedded backend"), `cpu_environment`
the environment (the platform plug-in above all), `command` the whole command line
for a corpus, and `run` runs it. This module imports no verl: a caller in the
workflow's venv builds the command and runs it with the interpreter that has verl.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from grumem.verl.online_overrides import online_overrides

PLUGIN = "grumem.verl.plugin"
ROLLOUT = "grumem_cpu"  # grumem.verl.plugin.ROLLOUT_NAME (named here without verl)
TRAINER = ("-m", "verl.trainer.main_ppo")
GRAMMARS = ("gate", "judge")
METRICS = "metrics.jsonl"


@dataclass(frozen=True)
class CpuSettings:
    """What a CPU run is sized by. Token budgets are the policy's tokens."""

    steps: int = 2
    batch: int = 2  # sessions rows a step (data.train_batch_size)
    rollouts: int = 2  # rollout.n: the group of the advantages
    max_prompt_tokens: int = 2048
    max_response_tokens: int = 128
    lr: float = 1e-6
    grammar: str | None = None  # draw answers under this grammar (gate): see cpu_rollout
    # ppo_max_token_len_per_gpu: tokens a micro-batch; the logits alone are 4 x 49,152
    # bytes a token for SmolLM2, and 4096 tokens took the update past 9 GB
    token_budget: int = 2048
    threads: int = 2  # OMP threads of each process that computes
    validate: bool = False  # validation before training and at test_freq


def cpu_overrides(model: str | Path, settings: CpuSettings, out_dir: str | Path) -> list[str]:
    """The Hydra overrides of a CPU run (not shell-quoted)."""
    s = settings
    if s.grammar is not None and s.grammar not in GRAMMARS:
        from grumem.errors import EmbeddedTrainError

        raise EmbeddedTrainError(f"grammar {s.grammar!r}: one of {', '.join(GRAMMARS)}, or none")
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    out = [
        f"actor_rollout_ref.model.path={model}",
        # flash attention (verl's default) needs a GPU; torch's sdpa runs anywhere
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        # recomputing activations costs time and 135M parameters' activations fit
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        # FSDP1 syncs module states from a GPU; FSDP2 runs on gloo
        f"{actor}.strategy=fsdp2",
        f"{actor}.fsdp_config.strategy=fsdp2",
        f"{actor}.fsdp_config.use_torch_compile=False",
        *(
            f"+{actor}.fsdp_config.mixed_precision.{k}_dtype=fp32"
            for k in ("param", "reduce", "buffer")
        ),
        f"{actor}.optim.lr={s.lr}",
        f"{actor}.use_kl_loss=False",
        f"{actor}.use_dynamic_bsz=True",
        f"{actor}.ppo_max_token_len_per_gpu={s.token_budget}",
        f"{actor}.ppo_mini_batch_size={s.batch}",
        f"{rollout}.log_prob_use_dynamic_bsz=True",
        f"{rollout}.log_prob_max_token_len_per_gpu={s.token_budget}",
        f"{rollout}.name={ROLLOUT}",
        f"{rollout}.mode=async",
        f"{rollout}.tensor_model_parallel_size=1",  # one process serves a replica
        f"{rollout}.calculate_log_probs=True",  # the server's log-probs: rollout_probs_diff
        f"{rollout}.agent.num_workers=1",
        f"+{rollout}.engine_kwargs.{ROLLOUT}.grammar={s.grammar or 'null'}",
        f"data.train_batch_size={s.batch}",
        "data.dataloader_num_workers=0",
        "reward.num_workers=1",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        # a failed group is refilled, not fatal (verl's own sampler's rule)
        "trainer.v1.sampler.sync_refill_failed_groups=True",
        f"trainer.total_training_steps={s.steps}",
        f"trainer.val_before_train={s.validate}",
        "trainer.device=cpu",
        # one logical GPU: verl's resource pools ask Ray for an accelerator a process
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        # verl's console and file loggers; the file is VERL_FILE_LOGGER_PATH (cpu_environment)
        "trainer.logger=[console,file]",
        f"trainer.default_local_dir={Path(out_dir) / 'checkpoints'}",
        "ray_kwargs.ray_init.num_cpus=16",
        "+ray_kwargs.ray_init.num_gpus=1",
        "+ray_kwargs.ray_init.include_dashboard=False",
    ]
    if not s.validate:
        out.append("trainer.test_freq=-1")
    return out


def cpu_environment(
    out_dir: str | Path, threads: int = 2, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a CPU run: `base` (default this process's) with the platform
    plug-in, offline model hubs, no wandb login, bounded threads, and verl's file
    logger writing `out_dir`/metrics.jsonl (one JSON object a step)."""
    env = dict(os.environ if base is None else base)
    env["VERL_FILE_LOGGER_PATH"] = str(Path(out_dir) / METRICS)
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(
        [*modules, PLUGIN] if PLUGIN not in modules else modules
    )
    env["VERL_PLATFORM"] = "cpu"
    env["WANDB_MODE"] = "disabled"
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["RAY_DISABLE_USAGE_STATS"] = "1"
    # Ray's single-node mode: the node's address is loopback, so Ray's and
    # TransferQueue's sockets bind 127.0.0.1, never the machine's address
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    return env


def command(
    corpus: str | Path,
    model: str | Path,
    out_dir: str | Path,
    settings: CpuSettings = CpuSettings(),
    extra: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """The trainer's command line: grumem's online overrides for `corpus` (an export's
    directory or a sessions.parquet), the CPU settings, then `extra` (which win)."""
    online = [
        shlex.split(o)[0]
        for o in online_overrides(
            corpus,
            rollout_n=settings.rollouts,
            max_prompt_length=settings.max_prompt_tokens,
            max_response_length=settings.max_response_tokens,
        )
    ]
    return [
        python or sys.executable,
        *TRAINER,
        *online,
        *cpu_overrides(model, settings, out_dir),
        *extra,
    ]


def run(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | Path, log: IO[str] | None = None
) -> int:
    """Run the trainer; its output to `log` (default: this process's stdout and stderr).
    Returns its exit code."""
    proc = subprocess.run(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        text=True,
    )
    return proc.returncode


def shell_line(argv: Sequence[str], env: Mapping[str, str], keys: Sequence[str]) -> str:
    """`argv` as one shell line, prefixed with the variables of `env` named in `keys`."""
    assigned = [f"{k}={shlex.quote(env[k])}" for k in keys if k in env]
    return " ".join([*assigned, *(shlex.quote(a) for a in argv)])


ENVIRONMENT_KEYS = (
    "VERL_FILE_LOGGER_PATH",
    "VERL_PLATFORM",
    "VERL_USE_EXTERNAL_MODULES",
    "WANDB_MODE",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "RAY_DISABLE_USAGE_STATS",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
)
