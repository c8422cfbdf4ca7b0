"""`grumem verl-config`: the Hydra overrides for verl (tests/test_verl.py composes
them onto verl's own trainer config; here, what is printed and its errors)."""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grumem.core.split import Split
from grumem.stages.export import export
from support.export import FILES, FIXTURE, calibrate, inputs

GRUMEM = str(Path(sys.executable).with_name("grumem"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GRUMEM, "verl-config", *args], capture_output=True, text=True)


def test_prints_the_overrides_for_a_corpus(tmp_path) -> None:
    corpus = tmp_path / "my corpus"  # a space: the overrides are shell-quoted
    corpus.mkdir()
    for split in ("train", "val"):
        pq.write_table(pa.table({"row": [1]}), corpus / f"turns-{split}.parquet")
    proc = run("--corpus", str(corpus), "--w-exit", "0.5")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    parsed = [shlex.split(line)[0] for line in lines]
    path = parsed[5].removeprefix("reward.custom_reward_function.path=").strip("'")
    assert parsed == [
        # quoted for Hydra too: a space, and a comma would make a sweep
        f"data.train_files='{(corpus / 'turns-train.parquet').resolve()}'",
        f"data.val_files='{(corpus / 'turns-val.parquet').resolve()}'",
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
    assert f"--corpus {tmp_path / 'nope'}: no turns-train.parquet there" in proc.stderr
    assert proc.stdout == ""


def write_sessions(corpus: Path, response: int = 1024) -> dict[str, Path]:
    """The demo's rows in their split files, as the export writes them: 3 sessions to
    train on (6 rows, 30 chunks), 1 to validate on (2 rows), 1 to test on."""
    from grumem.core.template import Budget
    from support.rollout_rows import demo_rollout_rows, write_split_files

    rows = demo_rollout_rows(budget=Budget(response=response))
    return {k: p.resolve() for k, p in write_split_files(corpus, rows).items()}


def printed(*args: str) -> list[str]:
    """The printed overrides, each line split as a shell splits `$(...)`: one word a line."""
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    words = [shlex.split(line) for line in proc.stdout.splitlines()]
    assert all(len(w) == 1 for w in words), words
    return [w[0] for w in words]


def test_online_prints_the_seams_the_splits_and_the_batch(tmp_path) -> None:
    files = write_sessions(tmp_path / "my corpus")  # a space: quoted for the shell and Hydra
    assert printed("--online", "--corpus", str(tmp_path / "my corpus"), "--rollout-n", "8") == [
        "trainer.use_v1=True",
        "trainer.v1.trainer_mode=sync",
        f"data.train_files='{files['train']}'",  # the export's split files, never one twice
        f"data.val_files='{files['val']}'",
        "data.prompt_key=prompt",
        "data.max_prompt_length=31744",  # the rows' budget: 32768 - 1024
        "data.max_response_length=1024",
        "data.train_batch_size=6",  # 32 a step by default, at most the 6 training rows
        "actor_rollout_ref.rollout.n=8",
        # one optimiser step a batch: 6 sessions rows x 5 turns (30 chunks / 6 rows)
        "actor_rollout_ref.actor.ppo_mini_batch_size=30",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768",
        "actor_rollout_ref.rollout.agent.default_agent_loop=grumem",
        "++actor_rollout_ref.rollout.agent.agent_loop_manager_class="
        "grumem.verl.worker.GrumemAgentLoopManager",
        "algorithm.adv_estimator=grumem",
        "algorithm.use_kl_in_reward=False",
        "trainer.v1.sampler.custom_sampler.path=pkg://grumem.verl.sampler",
        "trainer.v1.sampler.custom_sampler.name=GrumemReplayBuffer",
        "trainer.v1.sampler.sync_refill_failed_groups=True",  # a failed group is refilled
        "trainer.save_freq=1",  # once an epoch (one step here), and the last step
        "trainer.test_freq=1",
        'trainer.logger=["console"]',  # never wandb, which wants a login
    ]


def test_online_settings_in_sessions_rows(tmp_path) -> None:
    files = write_sessions(tmp_path)
    lines = printed(
        "--online",
        "--corpus",
        str(files["train"]),
        "--val-corpus",
        str(tmp_path),
        "--level",
        "L2",
        "--batch",
        "4",
        "--mini-batch",
        "2",
        "--save-freq",
        "3",
        "--test-freq",
        "2",
    )
    assert f"data.val_files={files['val']}" in lines  # a directory's sessions-val.parquet
    assert "data.train_batch_size=4" in lines
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=10" in lines  # 2 rows x 5 turns
    assert (lines[-4], lines[-3]) == ("trainer.save_freq=3", "trainer.test_freq=2")
    assert lines[-1] == "++grumem_level=L2"  # the agent loop's level over the rows'


def test_online_checks_name_the_numbers(tmp_path) -> None:
    files = write_sessions(tmp_path)
    proc = run("--online", "--corpus", str(tmp_path), "--batch", "32")
    assert proc.returncode != 0 and proc.stdout == ""
    assert (
        f"batch 32 sessions rows a step is more than the 6 rows of {files['train']}: verl would"
        " make 6 // 32 = 0 steps an epoch; give a batch of at most 6" in proc.stderr
    )
    proc = run("--online", "--corpus", str(tmp_path), "--batch", "6", "--mini-batch", "4")
    assert "mini-batch 4 does not divide the batch 6" in proc.stderr


def test_online_never_trains_on_held_out_rows(tmp_path) -> None:
    files = write_sessions(tmp_path)
    # every row, held-out ones too, is not a training file
    proc = run("--online", "--corpus", str(files["all"]), "--val-corpus", str(files["val"]))
    assert proc.returncode != 0
    assert "holds rows of split test, val (extra_info.split)" in proc.stderr
    assert "1 session(s) are in both" in proc.stderr


def test_online_refusals_name_what_to_do(tmp_path) -> None:
    proc = run("--online", "--corpus", str(tmp_path))
    assert proc.returncode != 0
    assert f"--corpus {tmp_path}: no sessions-train.parquet there" in proc.stderr
    write_sessions(tmp_path)
    proc = run("--online", "--corpus", str(tmp_path), "--rollout-n", "1")
    assert proc.returncode != 0 and "a group needs at least 2" in proc.stderr
    proc = run("--online", "--corpus", str(tmp_path), "--w-exit", "0.5")
    assert proc.returncode != 0 and "--w-exit: compute_score's weights" in proc.stderr
    proc = run("--corpus", str(tmp_path), "--rollout-n", "4", "--level", "L2")
    assert proc.returncode != 0
    assert "--rollout-n, --level: settings of online training; give them with --online" in (
        proc.stderr
    )
    (tmp_path / "sessions-train.parquet").write_bytes(b"not parquet")
    proc = run("--online", "--corpus", str(tmp_path))
    assert proc.returncode != 0 and "sessions-train.parquet: not a parquet file" in proc.stderr
    assert proc.stdout == ""


def test_a_value_hydra_would_misread_is_quoted_for_it() -> None:
    from grumem.verl.online_overrides import hydra_value

    assert hydra_value("/a/b_c-1.parquet") == "/a/b_c-1.parquet"
    assert hydra_value("pkg://grumem.verl.sampler") == "pkg://grumem.verl.sampler"
    assert hydra_value("/my corpus/x") == "'/my corpus/x'"
    assert hydra_value("/a,b") == "'/a,b'"  # unquoted, Hydra reads a sweep of two values
    assert hydra_value("/it's") == "'/it\\'s'"
    assert hydra_value("/a\\") == "'/a\\\\'"  # a backslash before the closing quote
    assert hydra_value("/x${y}") == "'/x\\${y}'"  # never an interpolation


# ---------------------------------------------------------------- train and val


def exported(tmp_path: Path, split: Split) -> Path:
    """The export fixture's corpus under `split` (sessions s-alpha, s-beta, s-gamma; the
    log has trajectories of s-alpha and s-beta only)."""
    for name in FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    calibrate(tmp_path)
    chunks = (str(tmp_path / "chunks.jsonl"),)
    queries = str(FIXTURE / "queries.yaml")
    export(inputs(tmp_path, chunks=chunks, queries=queries, project="demo", split=split))
    return tmp_path / "corpus"


def data_files(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert proc.returncode == 0, proc.stderr
    pairs = (shlex.split(line)[0].split("=", 1) for line in proc.stdout.splitlines())
    return {k: v for k, v in pairs if k in ("data.train_files", "data.val_files")}


@pytest.mark.parametrize("online", [False, True])
def test_train_and_val_are_the_exports_split_files(tmp_path: Path, online: bool) -> None:
    # train 0.5, val 0.5 under seed 1: s-alpha and s-gamma val, s-beta train
    corpus = exported(tmp_path, Split(train=0.5, val=0.5, test=0, seed=1))
    name = "sessions" if online else "turns"
    files = data_files(run(*(["--online"] if online else []), "--corpus", str(corpus)))
    assert files == {
        "data.train_files": str((corpus / f"{name}-train.parquet").resolve()),
        "data.val_files": str((corpus / f"{name}-val.parquet").resolve()),
    }
    sessions = {
        k: {r["extra_info"]["session"] for r in pq.read_table(v).to_pylist()}
        for k, v in files.items()
    }
    # s-gamma has no trajectory in the log: it has sessions rows, no turns
    val = {"s-alpha", "s-gamma"} if online else {"s-alpha"}
    assert sessions == {"data.train_files": {"s-beta"}, "data.val_files": val}


@pytest.mark.parametrize("online", [False, True])
def test_an_empty_split_is_refused_naming_the_project_split_and_fractions(
    tmp_path: Path, online: bool
) -> None:
    corpus = exported(tmp_path, Split())  # the default draws no session of three into val
    name = "sessions" if online else "turns"
    proc = run(*(["--online"] if online else []), "--corpus", str(corpus))
    assert proc.returncode != 0 and proc.stdout == ""
    assert (
        f"{(corpus / f'{name}-val.parquet').resolve()} has no rows: project demo's val split"
        " is empty (train 0.8 / val 0.1 / test 0.1, seed 0, drew none of its sessions into"
        " val), so there is nothing to validate on" in " ".join(proc.stderr.split())
    )


def test_one_file_is_never_both_train_and_val(tmp_path: Path) -> None:
    corpus = exported(tmp_path, Split(train=0.5, val=0.5, test=0, seed=1))
    train = corpus / "sessions-train.parquet"
    proc = run("--online", "--corpus", str(train))
    assert proc.returncode != 0 and "no file to validate on: give --val-corpus" in proc.stderr
    proc = run("--online", "--corpus", str(train), "--val-corpus", str(train))
    assert proc.returncode != 0
    assert f"{train.resolve()}: named to train and to validate on" in proc.stderr
    # a file to train on with another corpus's val split
    files = data_files(run("--online", "--corpus", str(train), "--val-corpus", str(corpus)))
    assert files["data.val_files"] == str((corpus / "sessions-val.parquet").resolve())
