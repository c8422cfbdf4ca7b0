"""The `train` rule's run of verl's own trainer (`grumem train`, `snakemake train`): a
project's `train:` settings, its training and validation splits, and the directory
results/{project}/train/ that the run owns.

- The command: `python -m verl.trainer.main_ppo` with grumem's online overrides
  (grumem.verl.online_overrides, which checks every setting against the files
  first), the backend's (embedded: grumem.verl.embedded; vllm, sglang: verl's own
  rollout servers on GPU nodes), the settings every backend shares, and last the
  section's own `overrides`. A key given twice keeps its last value in the place of
  its first, so command.txt and config.yaml hold each setting once.
- Checkpoints go to train/checkpoints/ (verl's default_local_dir, with the HF model
  beside verl's shards, so a step's policy loads with transformers or serves with
  vLLM). verl saves every save_freq steps and at the last.
- Resume: with `resume: true` (the default) a run continues from the last checkpoint
  (verl's resume_mode=auto) when the checkpoints were made by the same settings and
  files: checkpoints/grumem-run.json records the trainer's overrides and the files'
  sha256, and only steps, save_freq, test_freq and the loggers may differ. Anything
  else is refused naming what differs (set `resume: false` to start over, which
  removes the old checkpoints). A run whose last checkpoint is already its last
  step trains nothing.
- Metrics: verl's file logger writes the run's steps (one JSON object a step:
  `{"step": N, "data": {metric: value}}`, verl's metrics and grumem's under
  training/grumem/); checkpoints/metrics-history.jsonl keeps those of the steps
  the checkpoints hold, so a resumed run's metrics.jsonl has every step from 1.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grumem.core.train_plan import OnlinePlan
from grumem.errors import GrumemError, TrainPlanError
from grumem.io.jsonl import atomic_writer, sha256_file
from grumem.verl.embedded import CpuSettings, cpu_environment, cpu_overrides
from grumem.verl.online_overrides import OnlineSettings, hydra_value, online_run

TRAINER = ("-m", "verl.trainer.main_ppo")
COMPOSE = ("-m", "grumem.verl.compose")
BACKENDS = ("embedded", "vllm", "sglang")
EMBEDDED = "embedded"
# what a CPU step affords when the section leaves the lengths to the rows' budget
CPU_PROMPT_TOKENS, CPU_RESPONSE_TOKENS = 2048, 128
CHECKPOINTS = "checkpoints"
RUN_STATE = "grumem-run.json"  # in checkpoints/: the overrides and files that made them
HISTORY = "metrics-history.jsonl"  # in checkpoints/: the metrics of the steps they hold
RUN_LOG = ".metrics-run.jsonl"  # in checkpoints/: verl's file logger, this run's steps
LATEST = "latest_checkpointed_iteration.txt"  # verl's: written when a save is complete
# overrides a resumed run may change (the rest must be the checkpoints' own)
MAY_DIFFER = (
    "trainer.total_training_steps",
    "trainer.save_freq",
    "trainer.test_freq",
    "trainer.logger",
)


@dataclass(frozen=True)
class TrainSettings:
    """A project's `train:` section (workflow/schemas/config.schema.yaml), defaults
    filled by the config's validator."""

    backend: str = EMBEDDED
    model: str | None = None
    steps: int | None = None
    batch: int | None = None
    mini_batch: int | None = None
    rollouts: int = 4
    lr: float = 1e-6
    level: str | None = None
    max_response_tokens: int | None = None
    max_prompt_tokens: int | None = None
    save_freq: int | None = None
    test_freq: int | None = None
    kl: float = 0.0
    grammar: str | None = None
    logger: tuple[str, ...] = ("console",)
    resume: bool = True
    gpus: int = 8
    nodes: int = 1
    ray_address: str | None = None
    python: str | None = None
    overrides: tuple[str, ...] = ()

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> TrainSettings:
        fields = dict(section)
        for key in ("logger", "overrides"):
            if key in fields:
                fields[key] = tuple(fields[key])
        return cls(**fields)


@dataclass(frozen=True)
class TrainerRun:
    """The trainer's command for one run: argv (the interpreter first), the
    environment, the variables grumem set in it, and the plan it was checked by."""

    argv: list[str]
    env: dict[str, str]
    assigned: dict[str, str]
    plan: OnlinePlan
    steps: int
    state: dict[str, Any] = field(default_factory=dict)  # checkpoints/grumem-run.json

    @property
    def overrides(self) -> list[str]:
        return self.argv[1 + len(TRAINER) :]


def trainer_run(
    settings: TrainSettings,
    train_file: str | Path,
    val_file: str | Path,
    model: str | Path,
    out_dir: str | Path,
    project: str,
    python: str,
    base_env: Mapping[str, str] | None = None,
) -> TrainerRun:
    """The checked command (TrainPlanError before anything runs)."""
    s = settings
    if s.backend not in BACKENDS:
        raise TrainPlanError([f"backend {s.backend!r}: one of {', '.join(BACKENDS)}"])
    if s.grammar is not None and s.backend != EMBEDDED:
        why = f"grammar {s.grammar}: the embedded backend's rollout server draws under it"
        raise TrainPlanError([f"{why}; on {s.backend}, leave it null"])
    embedded = s.backend == EMBEDDED
    prompt = s.max_prompt_tokens or (CPU_PROMPT_TOKENS if embedded else None)
    response = s.max_response_tokens or (CPU_RESPONSE_TOKENS if embedded else None)
    online = online_run(
        train_file,
        val_file,
        OnlineSettings(
            rollout_n=s.rollouts,
            level=s.level,
            batch=s.batch,
            mini_batch=s.mini_batch,
            save_freq=s.save_freq,
            test_freq=s.test_freq,
            max_prompt_length=prompt,
            max_response_length=response,
        ),
    )
    plan = online.plan
    steps = s.steps or max(1, online.train.rows // plan.batch)
    out = Path(out_dir).resolve()
    checkpoints = out / CHECKPOINTS
    base = dict(os.environ if base_env is None else base_env)
    if embedded and prompt is not None and response is not None:
        # a micro-batch holds at least one whole turn row
        tokens = max(CpuSettings.token_budget, prompt + response)
        backend = cpu_overrides(CpuSettings(grammar=s.grammar, token_budget=tokens))
        env = cpu_environment(base=base)
    else:
        backend = gpu_overrides(s)
        env = dict(base)
    env["VERL_FILE_LOGGER_PATH"] = str(checkpoints / RUN_LOG)
    if "wandb" not in s.logger:
        env["WANDB_MODE"] = "disabled"  # wandb is imported by verl and wants a login
    actor = "actor_rollout_ref.actor"
    shared = [
        f"actor_rollout_ref.model.path={hydra_value(str(model))}",
        f"{actor}.optim.lr={s.lr}",
        *kl_overrides(s.kl),
        f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=False",
        f"trainer.logger=[{','.join([*s.logger, 'file'])}]",
        f"trainer.default_local_dir={hydra_value(str(checkpoints))}",
        "trainer.resume_mode=auto",
        f"{actor}.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        "trainer.project_name=grumem",
        f"trainer.experiment_name={hydra_value(project)}",
        # Hydra's own run directory (its log, no copy of the config): out of results/
        f"hydra.run.dir={hydra_value(str(checkpoints / 'hydra'))}",
        "hydra.output_subdir=null",
    ]
    overrides = last_wins([*online.overrides, *backend, *shared, *s.overrides])
    argv = [python, *TRAINER, *overrides]
    assigned = {k: v for k, v in env.items() if base.get(k) != v}
    state = {
        "overrides": [o for o in overrides if override_key(o) not in MAY_DIFFER],
        "train_sha256": sha256_file(online.train.path),
        "val_sha256": sha256_file(online.val.path),
    }
    return TrainerRun(argv, env, assigned, plan, steps, state)


def gpu_overrides(s: TrainSettings) -> list[str]:
    """verl's own rollout server (vllm, sglang) on the section's GPUs, or on the Ray
    cluster at `ray_address`."""
    out = [
        f"actor_rollout_ref.rollout.name={s.backend}",
        "actor_rollout_ref.rollout.mode=async",
        # activations of rows up to the whole prompt budget fit in a GPU's memory
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        f"trainer.n_gpus_per_node={s.gpus}",
        f"trainer.nnodes={s.nodes}",
    ]
    if s.ray_address is not None:
        out.append(f"+ray_kwargs.ray_init.address={hydra_value(s.ray_address)}")
    return out


def kl_overrides(kl: float) -> list[str]:
    """The KL to the reference policy as the actor's loss (verl loads the reference
    model for it); never in the reward: grumem's estimator refuses that."""
    if kl == 0:
        return ["actor_rollout_ref.actor.use_kl_loss=False"]
    return [
        "actor_rollout_ref.actor.use_kl_loss=True",
        f"actor_rollout_ref.actor.kl_loss_coef={kl}",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
    ]


def override_key(override: str) -> str:
    """The config key an override sets (`+a.b=1`, `++a.b=1` and `a.b=1` set `a.b`)."""
    return override.split("=", 1)[0].lstrip("+~")


def last_wins(overrides: Iterable[str]) -> list[str]:
    """Each key once, with its last value, in the place it first appeared."""
    by_key: dict[str, str] = {}
    for o in overrides:
        by_key[override_key(o)] = o
    return list(by_key.values())


def compose_argv(run: TrainerRun) -> list[str]:
    """The command that prints the run's resolved config (grumem.verl.compose): the
    trainer's overrides, Hydra's own left out."""
    config = [o for o in run.overrides if not override_key(o).startswith("hydra.")]
    return [run.argv[0], *COMPOSE, *config]


def command_text(run: TrainerRun, cwd: str | Path) -> str:
    """command.txt: the exact command, the variables grumem set first, to rerun by hand."""
    assigned = [f"{k}={shlex.quote(v)}" for k, v in sorted(run.assigned.items())]
    line = " ".join([*assigned, *(shlex.quote(a) for a in run.argv)])
    return (
        "# verl's trainer as `grumem train` ran it; the variables are the ones grumem set\n"
        f"cd {shlex.quote(str(cwd))} && {line}\n"
    )


# ------------------------------------------------------------------ checkpoints


def latest_checkpoint(checkpoints: Path) -> int:
    """The step of the last complete checkpoint (verl's tracker file), 0 if none."""
    try:
        return int((checkpoints / LATEST).read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        return 0
    except ValueError:
        raise GrumemError(
            f"{checkpoints / LATEST}: not a step number; the checkpoints are not verl's:"
            " set train.resume: false to start over"
        ) from None


def resume_step(run: TrainerRun, checkpoints: Path, resume: bool) -> int:
    """The step the run continues from (0: from scratch, the old checkpoints removed)."""
    latest = latest_checkpoint(checkpoints)
    if not resume or latest == 0:
        shutil.rmtree(checkpoints, ignore_errors=True)
        return 0
    try:
        made_by = json.loads((checkpoints / RUN_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        made_by = None
    if not isinstance(made_by, dict):
        raise GrumemError(
            f"{checkpoints}: a checkpoint of step {latest} without {RUN_STATE}, so not made"
            " by grumem train: move it away, or set train.resume: false to start over"
        )
    differs = state_differences(made_by, run.state)
    if differs:
        raise GrumemError(
            f"{checkpoints}: the checkpoint of step {latest} was made with other settings or"
            f" files ({'; '.join(differs)}): set train.resume: false to start over (the"
            " checkpoints are removed), or put the settings back"
        )
    if latest > run.steps:
        raise GrumemError(
            f"{checkpoints}: the last checkpoint is of step {latest}, after train.steps"
            f" {run.steps}: raise steps to continue, or set train.resume: false to start over"
        )
    return latest


def state_differences(made_by: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between two run states, each named: a file's sha256, or an
    override's key with its two values."""
    out = [
        f"{name} changed" for name in ("train_sha256", "val_sha256") if made_by[name] != now[name]
    ]
    before = {override_key(o): o for o in made_by["overrides"]}
    after = {override_key(o): o for o in now["overrides"]}
    for key in sorted(before.keys() | after.keys()):
        if before.get(key) != after.get(key):
            out.append(f"{key}: {before.get(key, 'unset')} -> {after.get(key, 'unset')}")
    return out


def write_state(run: TrainerRun, checkpoints: Path) -> None:
    with atomic_writer(checkpoints / RUN_STATE) as f:
        json.dump(run.state, f, indent=1)


# ---------------------------------------------------------------------- metrics


def read_steps(path: Path) -> list[dict[str, Any]]:
    """verl's file log: one JSON object a step; none when the file is absent."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def merged_steps(
    history: Sequence[dict[str, Any]], run: Sequence[dict[str, Any]], resumed_from: int
) -> list[dict[str, Any]]:
    """The steps up to the checkpoint resumed from, then this run's, by step."""
    kept = [h for h in history if h["step"] <= resumed_from]
    return sorted([*kept, *(r for r in run if r["step"] > resumed_from)], key=lambda m: m["step"])


def keep_history(checkpoints: Path, steps: Sequence[dict[str, Any]]) -> None:
    """Record the metrics of the steps the checkpoints hold, for a later resume."""
    latest = latest_checkpoint(checkpoints)
    with atomic_writer(checkpoints / HISTORY) as f:
        for m in steps:
            if m["step"] <= latest:
                f.write(json.dumps(m) + "\n")


def read_history(checkpoints: Path) -> list[dict[str, Any]]:
    return read_steps(checkpoints / HISTORY)
