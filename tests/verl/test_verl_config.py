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


def write_sessions(corpus: Path) -> Path:
    from grumem.core.template import Budget
    from support.rollout_rows import demo_rollout_rows, write_rows

    corpus.mkdir(parents=True, exist_ok=True)
    return write_rows(corpus / "sessions.parquet", demo_rollout_rows(budget=Budget(response=1024)))


def test_online_prints_the_seams_and_the_rows_budget(tmp_path) -> None:
    sessions = write_sessions(tmp_path / "my corpus").resolve()
    proc = run("--online", "--corpus", str(sessions.parent), "--rollout-n", "8")
    assert proc.returncode == 0, proc.stderr
    assert [shlex.split(line)[0] for line in proc.stdout.splitlines()] == [
        "trainer.use_v1=True",
        "trainer.v1.trainer_mode=sync",
        f"data.train_files={sessions}",
        f"data.val_files={sessions}",
        "data.prompt_key=prompt",
        "data.max_prompt_length=31744",  # the rows' budget: 32768 - 1024
        "data.max_response_length=1024",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.agent.default_agent_loop=grumem",
        "++actor_rollout_ref.rollout.agent.agent_loop_manager_class="
        "grumem.verl.worker.GrumemAgentLoopManager",
        "algorithm.adv_estimator=grumem",
        "algorithm.use_kl_in_reward=False",
        "trainer.v1.sampler.custom_sampler.path=pkg://grumem.verl.sampler",
        "trainer.v1.sampler.custom_sampler.name=GrumemReplayBuffer",
    ]


def test_online_refusals_name_what_to_do(tmp_path) -> None:
    proc = run("--online", "--corpus", str(tmp_path))
    assert proc.returncode != 0 and f"--corpus {tmp_path}: no sessions.parquet there" in proc.stderr
    write_sessions(tmp_path)
    proc = run("--online", "--corpus", str(tmp_path), "--rollout-n", "1")
    assert proc.returncode != 0 and "a group needs at least 2" in proc.stderr
    proc = run("--online", "--corpus", str(tmp_path), "--w-exit", "0.5")
    assert proc.returncode != 0 and "--w-exit: compute_score's weights" in proc.stderr
    proc = run("--corpus", str(tmp_path), "--rollout-n", "4")
    assert proc.returncode != 0 and "give it with --online" in proc.stderr
    (tmp_path / "sessions.parquet").write_bytes(b"not parquet")
    proc = run("--online", "--corpus", str(tmp_path))
    assert proc.returncode != 0 and "not a sessions.parquet with rows" in proc.stderr
    assert proc.stdout == ""
