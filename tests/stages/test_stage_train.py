"""Stage `train` (`grumem train`) up to the trainer: the settings checked against the
files before anything runs, the printed command, and a job that fails leaving no
output and its inputs as they were (tests/verl/test_verl_cpu.py runs the trainer)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grumem.io.jsonl import sha256_file
from support.rollout_rows import demo_rollout_rows, write_split_files

GRUMEM = str(Path(sys.executable).with_name("grumem"))
OUTPUTS = ("config.yaml", "command.txt", "metrics.jsonl")


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, Path]:
    # 3 sessions to train on (6 rows), 2 held out; an HF model folder as verl loads one
    files = write_split_files(tmp_path / "corpus", demo_rollout_rows())
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    files["model"] = model
    return files


def train(corpus: dict[str, Path], out: Path, section: dict, *extra: str):
    settings = json.dumps({"train": {"model": str(corpus["model"]), **section}})
    return subprocess.run(
        [GRUMEM, "train", "--settings", settings, "--project", "demo"]
        + ["--train", str(corpus["train"]), "--val", str(corpus["val"])]
        + ["--out-dir", str(out), "--python", sys.executable, *extra],
        capture_output=True,
        text=True,
    )


def test_print_shows_the_command_and_runs_nothing(corpus, tmp_path) -> None:
    out = tmp_path / "train"
    proc = train(corpus, out, {"steps": 2, "batch": 1, "rollouts": 2}, "--print")
    assert proc.returncode == 0, proc.stderr
    words = shlex.split(proc.stdout.splitlines()[-1])
    at = words.index("-m")
    assert words[at - 1] == sys.executable and words[at + 1] == "verl.trainer.main_ppo"
    assert "VERL_PLATFORM=cpu" in words[:at]
    assert f"data.train_files={corpus['train'].resolve()}" in words
    assert f"actor_rollout_ref.model.path={corpus['model']}" in words
    assert "trainer.total_training_steps=2" in words
    assert not out.exists()


def test_settings_are_checked_against_the_files_before_anything_runs(corpus, tmp_path) -> None:
    out = tmp_path / "train"
    before = {k: sha256_file(p) for k, p in corpus.items() if p.is_file()}
    proc = train(corpus, out, {"batch": 32})
    assert proc.returncode != 0
    assert (
        f"batch 32 sessions rows a step is more than the 6 rows of {corpus['train'].resolve()}"
        in proc.stderr
    )
    assert not out.exists()
    proc = train(corpus, out, {"rollouts": 1})
    assert proc.returncode != 0 and "projects.demo.train.rollouts" in proc.stderr
    assert {k: sha256_file(p) for k, p in corpus.items() if p.is_file()} == before


def test_a_failed_job_writes_no_output_and_leaves_its_inputs(corpus, tmp_path) -> None:
    """This interpreter has no verl: composing the trainer's config fails, and the job
    with it, before any output is written or a trainer started."""
    out = tmp_path / "train"
    before = {k: sha256_file(p) for k, p in corpus.items() if p.is_file()}
    proc = train(corpus, out, {"batch": 1})
    assert proc.returncode != 0
    assert "verl's trainer config does not compose with these overrides" in proc.stderr
    assert not any((out / name).exists() for name in OUTPUTS)
    assert {k: sha256_file(p) for k, p in corpus.items() if p.is_file()} == before


def test_a_config_without_a_train_section_says_so(corpus, tmp_path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"projects": {"demo": {"chunks": "x", "queries": "q"}}}))
    proc = subprocess.run(
        [GRUMEM, "train", "--config", str(config), "--project", "demo"]
        + ["--train", str(corpus["train"]), "--val", str(corpus["val"])]
        + ["--out-dir", str(tmp_path / "train")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "projects.demo.train" in proc.stderr
    assert "missing: the project trains with a `train:` section" in proc.stderr
