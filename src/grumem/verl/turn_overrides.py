"""The Hydra overrides that point verl's PPO/GRPO trainer at a grumem corpus.

`grumem verl-config --corpus results/demo/corpus` prints them, one a line, for
`python -m verl.trainer.main_ppo $(grumem verl-config …) <your model, GPUs…>`:
the corpus's turns.parquet as train (and, unless given, validation) files, its
chat-message `prompt` column, and grumem/verl/reward.py as the custom reward
function (verl loads it by path; grumem must be installed where verl runs, the
`[verl]` extra). Prompt and response lengths default to the corpus budget's
(config budget.context 32768 less budget.response 2048): verl's own default of
512 tokens would drop almost every grumem prompt.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path

from grumem.errors import GrumemError
from grumem.verl.online_overrides import hydra_value, shell_lines

TURNS = "turns.parquet"  # the export's file name (grumem.stages.export.TURNS)
MAX_PROMPT_LENGTH = 32768 - 2048
MAX_RESPONSE_LENGTH = 2048


def reward_function_path() -> Path:
    """The file verl loads compute_score from."""
    import grumem.verl.reward

    return Path(inspect.getfile(grumem.verl.reward)).resolve()


def turn_overrides(
    corpus: str | Path,
    val_corpus: str | Path | None = None,
    max_prompt_length: int = MAX_PROMPT_LENGTH,
    max_response_length: int = MAX_RESPONSE_LENGTH,
    reward_kwargs: Mapping[str, float] | None = None,
) -> list[str]:
    """The overrides, shell-quoted (and a value Hydra would misread quoted for it).
    `corpus` is an export's directory (or its turns.parquet); it must exist, or the
    trainer would fail much later."""
    train = corpus_file(corpus, TURNS, "--corpus")
    val = train if val_corpus is None else corpus_file(val_corpus, TURNS, "--val-corpus")
    out = [
        f"data.train_files={hydra_value(str(train))}",
        f"data.val_files={hydra_value(str(val))}",
        "data.prompt_key=prompt",
        f"data.max_prompt_length={max_prompt_length}",
        f"data.max_response_length={max_response_length}",
        f"reward.custom_reward_function.path={hydra_value(str(reward_function_path()))}",
        "reward.custom_reward_function.name=compute_score",
    ]
    # the trainer's config has no reward_kwargs key: Hydra adds it with `+`
    out += [
        f"+reward.custom_reward_function.reward_kwargs.{k}={v}"
        for k, v in (reward_kwargs or {}).items()
    ]
    return shell_lines(out)


def corpus_file(corpus: str | Path, name: str, option: str) -> Path:
    """The export's file `name`, given `corpus` (`option`'s value): its directory, or the
    file itself; it must exist, or the trainer would fail much later."""
    path = Path(corpus)
    if path.is_dir():
        path = path / name
    if not path.is_file():
        raise GrumemError(
            f"{option} {corpus}: no {name} there; export a corpus first"
            " (snakemake all, or grumem export … --out-dir DIR)"
        )
    return path.resolve()
