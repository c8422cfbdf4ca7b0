"""The Hydra overrides that train the GRU-Mem loop online with verl 0.9.1
(`grumem verl-config --online --corpus DIR`), from an export's sessions.parquet.

Each override names one of the seams grumem extends verl at (docs/verl.md,
"Online training"): the v1 trainer in sync mode; the sessions rows; the
`grumem` agent loop; the manager whose workers run the group step; the
registered estimator `grumem`; the sampler that logs grumem's metrics.
Lengths come from the rows' budget: rollout.prompt_length is the context less
the response budget, response_length the response budget (cl100k tokens; the
agent loop refuses a prompt longer in the policy's tokens, naming its largest
component). rollout.n is the group of the paper's advantages: at least 2.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pyarrow.parquet as pq

from grumem.core.rollout_row import AGENT_NAME
from grumem.errors import GrumemError
from grumem.verl.turn_overrides import corpus_file

SESSIONS = "sessions.parquet"  # the export's file name
ROLLOUT_N = 4
MANAGER = "grumem.verl.worker.GrumemAgentLoopManager"
ESTIMATOR = "grumem"  # grumem.verl.estimator.ESTIMATOR, named here without importing verl
SAMPLER = ("pkg://grumem.verl.sampler", "GrumemReplayBuffer")


def online_overrides(
    corpus: str | Path,
    val_corpus: str | Path | None = None,
    rollout_n: int = ROLLOUT_N,
    max_prompt_length: int | None = None,
    max_response_length: int | None = None,
) -> list[str]:
    """The overrides, shell-quoted. `corpus` is an export's directory (or its
    sessions.parquet); lengths default to its first row's budget."""
    if rollout_n < 2:
        raise GrumemError(
            f"--rollout-n {rollout_n}: the advantages are normalised within the rollouts of a"
            " row, so a group needs at least 2"
        )
    train = corpus_file(corpus, SESSIONS, "--corpus")
    val = train if val_corpus is None else corpus_file(val_corpus, SESSIONS, "--val-corpus")
    budget = first_budget(train)
    prompt = (
        budget["context"] - budget["response"] if max_prompt_length is None else max_prompt_length
    )
    response = budget["response"] if max_response_length is None else max_response_length
    path, name = SAMPLER
    out = [
        "trainer.use_v1=True",
        "trainer.v1.trainer_mode=sync",
        f"data.train_files={train}",
        f"data.val_files={val}",
        "data.prompt_key=prompt",
        f"data.max_prompt_length={prompt}",
        f"data.max_response_length={response}",
        f"actor_rollout_ref.rollout.n={rollout_n}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
        # verl 0.9.1's trainer YAML lacks this key (its dataclass has it): ++ adds or sets it
        f"++actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER}",
        f"algorithm.adv_estimator={ESTIMATOR}",
        "algorithm.use_kl_in_reward=False",
        f"trainer.v1.sampler.custom_sampler.path={path}",
        f"trainer.v1.sampler.custom_sampler.name={name}",
    ]
    return [shlex.quote(o) for o in out]


def first_budget(path: Path) -> dict[str, int]:
    """The budget of the file's first row (the export writes one budget for all)."""
    try:
        batch = next(pq.ParquetFile(path).iter_batches(batch_size=1, columns=["extra_info"]))
        budget: dict[str, int] = batch.to_pylist()[0]["extra_info"]["budget"]
        return budget
    except (OSError, StopIteration, KeyError, TypeError, ValueError) as e:
        raise GrumemError(
            f"{path}: not a sessions.parquet with rows ({type(e).__name__}: {e});"
            " export the corpus with this grumem"
        ) from None
