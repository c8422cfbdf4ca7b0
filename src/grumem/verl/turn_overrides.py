"""The Hydra overrides that point verl's PPO/GRPO trainer at a grumem corpus.

`grumem verl-config --corpus results/demo/corpus` prints them, one a line, for
`python -m verl.trainer.main_ppo $(grumem verl-config …) <your model, GPUs…>`:
the corpus's train split (turns-train.parquet) to train on and its val split
(turns-val.parquet) to validate on, never one file for both, its chat-message
`prompt` column, and grumem/verl/reward.py as the custom reward
function (verl loads it by path; grumem must be installed where verl runs, the
`[verl]` extra). Prompt and response lengths default to the corpus budget's
(config budget.context 32768 less budget.response 2048): verl's own default of
512 tokens would drop almost every grumem prompt.
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

import pyarrow.parquet as pq

from grumem.core.split import SPLIT_METADATA, SplitName, split_file
from grumem.errors import GrumemError, SplitError

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
    `corpus` is an export's directory (or its turns-train.parquet); it must exist, or
    the trainer would fail much later."""
    train, val = train_and_val_files(corpus, val_corpus, TURNS)
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


def shell_lines(overrides: list[str]) -> list[str]:
    """Each override quoted for a POSIX shell, as `$(grumem verl-config …)` splits them."""
    return [shlex.quote(o) for o in overrides]


# what Hydra's override grammar reads unquoted as the same string (no sweep, list, dict,
# interpolation or escape): anything else is given as a quoted string
_PLAIN = re.compile(r"[A-Za-z0-9_/.:@%+\-]+")


def hydra_value(value: str) -> str:
    """`value` as an override's value Hydra reads back exactly: as it is when plain, else
    single-quoted (a quote, and backslashes before a quote or the end, escaped; `${`
    escaped so OmegaConf does not read an interpolation). A path with a space or a
    comma is otherwise split by the shell or read by Hydra as a sweep."""
    if _PLAIN.fullmatch(value):
        return value
    body = re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), value)
    return "'" + body.replace("${", "\\${") + "'"


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


def train_and_val_files(
    corpus: str | Path, val_corpus: str | Path | None, name: str
) -> tuple[Path, Path]:
    """The files verl trains and validates on, two of them and neither empty. `corpus` is an
    export's directory (its train split file of `name`: turns-train.parquet for
    turns.parquet) or a file to train on; `val_corpus` a directory (its val split file)
    or a file, by default the corpus's val split. verl 0.9.1's RLHFDataset reads every
    file it is given whole and filters no column: the splits are files of their own."""
    train = corpus_file(corpus, split_file(name, "train"), "--corpus")
    if val_corpus is None and not Path(corpus).is_dir():
        raise GrumemError(
            f"--corpus {corpus}: a file to train on, and no file to validate on: give"
            f" --val-corpus, or the export's directory (its {split_file(name, 'train')} and"
            f" {split_file(name, 'val')})"
        )
    val_option = "--corpus" if val_corpus is None else "--val-corpus"
    val = corpus_file(
        corpus if val_corpus is None else val_corpus, split_file(name, "val"), val_option
    )
    if train == val:
        raise GrumemError(
            f"{train}: named to train and to validate on; validate on sessions not trained"
            " on (the export's val split, or another file with --val-corpus)"
        )
    _has_rows(train, "train")
    _has_rows(val, "val")
    return train, val


def _has_rows(path: Path, split: SplitName) -> None:
    """`path` holds rows; an empty split file is refused naming its project, split and
    fractions (the export writes them into its metadata)."""
    try:
        f = pq.ParquetFile(path)
    except (OSError, ValueError) as e:
        raise GrumemError(
            f"{path}: not a parquet file ({type(e).__name__}: {e}); export the corpus again"
        ) from None
    if f.metadata.num_rows:
        return
    meta = (f.schema_arrow.metadata or {}).get(SPLIT_METADATA)
    if meta is None:
        raise SplitError(None, f"{path} has no rows: nothing to {_USE[split]}")
    m = json.loads(meta)
    whose = f"project {m['project']}'s " if m["project"] else "the "
    raise SplitError(
        None,
        f"{path} has no rows: {whose}{m['split']} split is empty"
        f" (train {m['train']:g} / val {m['val']:g} / test {m['test']:g}, seed {m['seed']},"
        f" drew none of its sessions into {m['split']}), so there is nothing to"
        f" {_USE[split]}. Set the project's `split:` (fractions or seed) so that"
        f" {m['split']} gets a session, and export again",
    )


_USE = {"train": "train on", "val": "validate on"}
