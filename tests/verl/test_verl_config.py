"""`grumem verl-config`: the Hydra overrides for verl (tests/test_verl.py composes
them onto verl's own trainer config; here, what is printed and its errors)."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

GRUMEM = str(Path(sys.executable).with_name("grumem"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GRUMEM, "verl-config", *args], capture_output=True, text=True)


def test_prints_the_overrides_for_a_corpus(tmp_path) -> None:
    corpus = tmp_path / "my corpus"  # a space: the overrides are shell-quoted
    corpus.mkdir()
    (corpus / "turns.parquet").write_bytes(b"")
    proc = run("--corpus", str(corpus), "--w-exit", "0.5")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    parsed = [shlex.split(line)[0] for line in lines]
    turns = (corpus / "turns.parquet").resolve()
    path = parsed[5].removeprefix("reward.custom_reward_function.path=")
    assert parsed == [
        f"data.train_files={turns}",
        f"data.val_files={turns}",
        "data.prompt_key=prompt",
        "data.max_prompt_length=30720",
        "data.max_response_length=2048",
        f"reward.custom_reward_function.path={path}",
        "reward.custom_reward_function.name=compute_score",
        "+reward.custom_reward_function.reward_kwargs.w_exit=0.5",
    ]
    # the path is a file verl can load on its own
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.compute_score)


def test_missing_corpus_fails_naming_it(tmp_path) -> None:
    proc = run("--corpus", str(tmp_path / "nope"))
    assert proc.returncode != 0
    assert f"--corpus {tmp_path / 'nope'}: no turns.parquet there" in proc.stderr
    assert proc.stdout == ""
