"""Stage `train`: verl's own trainer with grumem's online loop on a project's training
split, validated on its validation split, by the project's `train:` settings
(grumem.verl.training decides the command, the resume and the metrics).

Writes into --out-dir (results/{project}/train/): config.yaml (verl's config,
resolved, as the trainer composes it), command.txt (the command and the variables
grumem set, to rerun by hand), metrics.jsonl (one JSON object a step, every step
from 1), and checkpoints/ (verl's, kept across runs for resume). Every setting is
checked against the files, and the config composed, before Ray starts. The three
files are written whole or not at all; the input files are only read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from grumem.config.settings import train_settings_from_args
from grumem.errors import GrumemError
from grumem.io.jsonl import atomic_writer
from grumem.verl.cpu_model import model_dir
from grumem.verl.training import (
    CHECKPOINTS,
    EMBEDDED,
    RUN_LOG,
    TrainerRun,
    TrainSettings,
    command_text,
    compose_argv,
    keep_history,
    merged_steps,
    read_history,
    read_steps,
    resume_step,
    trainer_run,
    write_state,
)

DEFAULT_PYTHON = ".venv-verl/bin/python"  # make venv-verl, in the workflow's directory
OUTPUTS = ("config.yaml", "command.txt", "metrics.jsonl")


def main(args: argparse.Namespace) -> int:
    settings = TrainSettings.of(train_settings_from_args(args, args.project))
    python = args.python or settings.python or DEFAULT_PYTHON
    if not Path(python).is_file():
        raise GrumemError(
            f"{python}: no such interpreter; the trainer runs in a venv with verl 0.9.1 and"
            " grumem (make venv-verl), named by train.python"
        )
    out = Path(args.out_dir).resolve()
    if args.print_only:
        run = trainer_run(
            settings, args.train, args.val, resolved_model(settings, python), out,
            args.project, python,
        )  # fmt: skip
        print(command_text(run, out), end="")
        return 0
    train(settings, args, python, out)
    return 0


def train(settings: TrainSettings, args: argparse.Namespace, python: str, out: Path) -> None:
    # the settings against the files first (TrainPlanError): before the model is converted
    trainer_run(settings, args.train, args.val, "unconverted", out, args.project, python)
    run = trainer_run(
        settings, args.train, args.val, resolved_model(settings, python), out,
        args.project, python,
    )  # fmt: skip
    checkpoints = out / CHECKPOINTS
    resumed = resume_step(run, checkpoints, settings.resume)
    config = composed(run)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_writer(out / "config.yaml") as f:
        f.write(config)
    with atomic_writer(out / "command.txt") as f:
        f.write(command_text(run, out))
    history = read_history(checkpoints)
    steps = history
    if resumed < run.steps:
        checkpoints.mkdir(parents=True, exist_ok=True)
        write_state(run, checkpoints)
        (checkpoints / RUN_LOG).unlink(missing_ok=True)
        if resumed:
            print(f"grumem train: resuming from the checkpoint of step {resumed}", file=sys.stderr)
        started = time.monotonic()
        try:
            code = run_trainer(run, out)
        finally:
            # whatever happened, the steps the checkpoints now hold keep their metrics
            steps = merged_steps(history, read_steps(checkpoints / RUN_LOG), resumed)
            keep_history(checkpoints, steps)
        if code != 0:
            raise GrumemError(
                f"verl's trainer failed (exit code {code}) after {time.monotonic() - started:.0f}"
                " s: its output is above; the checkpoints it completed are kept for a resume"
            )
    else:
        print(f"grumem train: the checkpoint of step {resumed} is the last step", file=sys.stderr)
    done = [m["step"] for m in steps]
    if done != list(range(1, run.steps + 1)):
        raise GrumemError(
            f"verl's trainer logged steps {done}, not 1 to {run.steps}: metrics.jsonl is not"
            " written; see its output above"
        )
    with atomic_writer(out / "metrics.jsonl") as f:
        for m in steps:
            f.write(json.dumps(m) + "\n")


def resolved_model(settings: TrainSettings, python: str) -> str:
    """An HF folder (a GGUF converted once, by the verl interpreter), or on a GPU
    backend a model id of the Hugging Face hub as it is."""
    source = settings.model
    if source is not None and settings.backend != EMBEDDED and not Path(source).exists():
        return source
    return str(model_dir(source, python=python))


def composed(run: TrainerRun) -> str:
    """verl's config for the run's overrides, resolved (grumem.verl.compose)."""
    # composing reads verl's YAML only: the plug-in (its platform, the CPU rollout) is
    # for the trainer's processes
    env = {k: v for k, v in run.env.items() if k != "VERL_USE_EXTERNAL_MODULES"}
    proc = subprocess.run(compose_argv(run), capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise GrumemError(
            f"verl's trainer config does not compose with these overrides: {proc.stderr[-3000:]}"
        )
    return proc.stdout


def run_trainer(run: TrainerRun, cwd: Path) -> int:
    """The trainer, its output on this process's stderr (the rule's log)."""
    proc = subprocess.run(run.argv, env=run.env, cwd=cwd, stdout=sys.stderr, stderr=sys.stderr)
    return proc.returncode
