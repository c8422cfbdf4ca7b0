"""The Hydra overrides that train the GRU-Mem loop online with verl 0.9.1
(`grumem verl-config --online --corpus DIR`), from an export's sessions files.

Each override names one of the seams grumem extends verl at (docs/verl.md,
"Online training"): the v1 trainer in sync mode; the sessions rows; the
`grumem` agent loop; the manager whose workers run the group step; the
registered estimator `grumem`; the sampler that logs grumem's metrics and
evicts and refills a failed group (trainer.v1.sampler.sync_refill_failed_groups,
which also makes verl's dataloader fetch one row at a time, as a refill needs).
Lengths come from the rows' budget: rollout.prompt_length is the context less
the response budget, response_length the response budget (cl100k tokens; the
agent loop refuses a prompt longer in the policy's tokens, naming its largest
component); a turn row is at most their sum, so that is the actor's token budget
a micro-batch (dynamic batch sizes: verl's checks of ppo_mini_batch_size against
data.train_batch_size count prompts, and a grumem row is a turn).

The training and validation files are the export's split files (an export's
directory gives sessions-train.parquet and sessions-val.parquet; a file to train on
needs a validation file: grumem.verl.turn_overrides.train_and_val_files). Batch
settings count sessions rows and are converted (grumem.core.train_plan, which checks
them all against the files first).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pyarrow.parquet as pq

from grumem.core.rollout_row import AGENT_NAME
from grumem.core.train_plan import OnlinePlan, SplitShape, check_online_plan, ppo_mini_batch_size
from grumem.errors import GrumemError
from grumem.verl.turn_overrides import hydra_value, shell_lines, train_and_val_files

__all__ = ["LEVEL_KEY", "OnlineRun", "OnlineSettings", "online_overrides", "online_run"]
__all__ += ["shell_lines", "split_shape", "hydra_value"]

SESSIONS = "sessions.parquet"  # the export's file name: every row
ROLLOUT_N = 4
BATCH = 32  # sessions rows a step, or every training row when there are fewer
MANAGER = "grumem.verl.worker.GrumemAgentLoopManager"
ESTIMATOR = "grumem"  # grumem.verl.estimator.ESTIMATOR, named here without importing verl
SAMPLER = ("pkg://grumem.verl.sampler", "GrumemReplayBuffer")
LEVEL_KEY = "grumem_level"  # read by the agent loop: the rollouts' level over the rows'
LEVELS = ("L1", "L2")


@dataclass(frozen=True)
class OnlineSettings:
    """What a user chooses (None: the default): `batch` and `mini_batch` in sessions
    rows (a training step, an optimiser step), `level` the rollouts' (None: each row's
    own), `save_freq` and `test_freq` in steps (default: once an epoch), `steps` the
    training steps (None: not set, verl's epochs decide)."""

    rollout_n: int = ROLLOUT_N
    level: str | None = None
    batch: int | None = None
    mini_batch: int | None = None
    save_freq: int | None = None
    test_freq: int | None = None
    max_prompt_length: int | None = None
    max_response_length: int | None = None
    steps: int | None = None


@dataclass(frozen=True)
class OnlineRun:
    """What online_run decided: the checked plan, the two files' shapes, the overrides."""

    plan: OnlinePlan
    train: SplitShape
    val: SplitShape
    overrides: list[str]


def online_overrides(
    corpus: str | Path, val_corpus: str | Path | None = None, settings: OnlineSettings | None = None
) -> list[str]:
    """The overrides, one argv element each (values quoted for Hydra where they need
    it), after every setting is checked against the files (TrainPlanError)."""
    return online_run(corpus, val_corpus, settings).overrides


def online_run(
    corpus: str | Path, val_corpus: str | Path | None = None, settings: OnlineSettings | None = None
) -> OnlineRun:
    """online_overrides, with the plan and the files' shapes they were made from."""
    s = settings or OnlineSettings()
    if s.level is not None and s.level not in LEVELS:
        raise GrumemError(f"--level {s.level}: give L1 or L2")
    train_path, val_path = train_and_val_files(corpus, val_corpus, SESSIONS)
    train, budget = split_shape(train_path)
    val, _ = split_shape(val_path)
    batch = min(BATCH, train.rows) if s.batch is None else s.batch
    epoch = max(1, train.rows // batch) if batch >= 1 else 1
    plan = OnlinePlan(
        batch=batch,
        mini_batch=batch if s.mini_batch is None else s.mini_batch,
        rollout_n=s.rollout_n,
        save_freq=epoch if s.save_freq is None else s.save_freq,
        test_freq=epoch if s.test_freq is None else s.test_freq,
        steps=s.steps,
    )
    check_online_plan(plan, train, val)
    prompt = budget["context"] - budget["response"]
    prompt = prompt if s.max_prompt_length is None else s.max_prompt_length
    response = budget["response"] if s.max_response_length is None else s.max_response_length
    path, name = SAMPLER
    out = [
        "trainer.use_v1=True",
        "trainer.v1.trainer_mode=sync",
        f"data.train_files={hydra_value(train.path)}",
        f"data.val_files={hydra_value(val.path)}",
        "data.prompt_key=prompt",
        f"data.max_prompt_length={prompt}",
        f"data.max_response_length={response}",
        f"data.train_batch_size={plan.batch}",
        f"actor_rollout_ref.rollout.n={plan.rollout_n}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={ppo_mini_batch_size(plan, train)}",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={prompt + response}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
        # verl 0.9.1's trainer YAML lacks this key (its dataclass has it): ++ adds or sets it
        f"++actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER}",
        f"algorithm.adv_estimator={ESTIMATOR}",
        "algorithm.use_kl_in_reward=False",
        f"trainer.v1.sampler.custom_sampler.path={path}",
        f"trainer.v1.sampler.custom_sampler.name={name}",
        "trainer.v1.sampler.sync_refill_failed_groups=True",
        f"trainer.save_freq={plan.save_freq}",
        f"trainer.test_freq={plan.test_freq}",
        'trainer.logger=["console"]',
    ]
    if plan.steps is not None:
        out.append(f"trainer.total_training_steps={plan.steps}")
    if s.level is not None:
        out.append(f"++{LEVEL_KEY}={s.level}")  # not a key of verl's: added
    return OnlineRun(plan, train, val, out)


def split_shape(path: Path) -> tuple[SplitShape, dict[str, int]]:
    """The file's shape for the checks, and the budget of its first row (the export
    writes one budget for all); read from a few columns, never the chunk texts."""
    columns = ["reward_model.ground_truth", "extra_info.project", "extra_info.session"]
    columns += ["extra_info.split", "extra_info.budget"]
    try:
        table = pq.read_table(path, columns=columns)
        labels, projects, sessions, splits = (
            cast(list[Any], table.column(c).to_pylist())
            for c in ("ground_truth", "project", "session", "split")
        )
        budget: dict[str, int] = table.column("budget")[0].as_py()
    except (OSError, IndexError, KeyError, TypeError, ValueError) as e:
        raise GrumemError(
            f"{path}: not a sessions.parquet with rows ({type(e).__name__}: {e});"
            " export the corpus with this grumem"
        ) from None
    shape = SplitShape(
        path=str(path),
        rows=table.num_rows,
        chunks=sum(len(g) for g in labels),
        sessions=frozenset(zip(projects, sessions, strict=True)),
        splits=frozenset(splits),
    )
    return shape, budget
