"""The corpus proven with verl itself, not with a copy of its conventions.

The demo (fake server, loop.samples 2, so every (query, session) is a group of
two, whose sample 1 the script answers more narrowly than sample 0, so groups
have variance) runs to turns.parquet; its advantages are checked by hand on
one group; then, in .venv-verl (verl 0.9.1, made by `make
venv-verl`, a prerequisite of `make test`), verl's RLHFDataset loads it with
SmolLM2's tokenizer from the demo's GGUF and applies the chat template to every
row, and compute_score, loaded by verl's get_custom_reward_fn from the file
grumem/verl/reward.py, gives every recorded response the rewards the corpus
holds for its turn. Nothing is skipped: without .venv-verl the test fails
saying how to make it.
"""

from __future__ import annotations

import inspect
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import grumem.verl.reward
from grumem.core.advantages import EPS
from grumem.verl.reward import compute_score
from support.verl_venv import VERL_PYTHON, samples2_script, smollm2_gguf
from support.workflow import REPO, snakemake, write_config

CHECK = Path(__file__).parents[1] / "support" / "verl_check.py"


def check_a_group_by_hand(corpus: Path) -> None:
    """errors-and-fixes / demo-02-slugify-unicode, L1, r_format 1 and r_exit −0.5
    (late: no `end` recorded, last evidence at t=4) for both samples:
    r_update sample 0: +1 −1 −1 −1 +1 (mean −0.2), R_0 = −0.2 − 0.5 + 1 = 0.3;
             sample 1: −1 −1 −1 −1 +1 (mean −0.6), R_1 = −0.6 − 0.5 + 1 = −0.1.
    mean 0.1, population std 0.2: A_traj = ±0.2/(0.2 + ε) on every turn.
    At t=1, +1 against −1: A_turn = ±1/(1 + ε); at t=2..5 equal values: A_turn
    null (zero variance), so A is null there; A(t=1) = 0.9·A_traj + 0.1·A_turn."""
    by_id = {}
    for line in (corpus / "trajectories.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        by_id[record["trajectory_id"]] = record
    group = "demo/errors-and-fixes/demo-02-slugify-unicode/"
    s0, s1 = by_id[group + "0"], by_id[group + "1"]
    assert [t["r_update"] for t in s0["turns"]] == [1, -1, -1, -1, 1]
    assert [t["r_update"] for t in s1["turns"]] == [-1, -1, -1, -1, 1]
    for s in (s0, s1):
        assert (s["r_exit"], s["r_format"], s["t_last_evidence"]) == (-0.5, 1, 4)
    for s, sign in ((s0, 1), (s1, -1)):
        a_traj = sign * 0.2 / (0.2 + EPS)
        a_turn = sign * 1 / (1 + EPS)
        assert [t["advantage_traj"] for t in s["turns"]] == [pytest.approx(a_traj)] * 5
        assert [t["advantage_turn"] for t in s["turns"]] == [pytest.approx(a_turn)] + [None] * 4
        assert [t["advantage"] for t in s["turns"]] == [
            pytest.approx(0.9 * a_traj + 0.1 * a_turn)
        ] + [None] * 4


@pytest.mark.slow
@pytest.mark.verl
def test_verl_loads_the_corpus_and_scores_it_with_compute_score(tmp_path, fake_server) -> None:
    assert VERL_PYTHON.exists(), (
        f"{VERL_PYTHON} does not exist: this test runs verl in a venv of its own;"
        " make it with `make venv-verl` (about 5-8 minutes and 6.5 GB the first time)"
    )
    server = fake_server(samples2_script())
    overlay = yaml.safe_load((REPO / "fixtures/demo/config-samples2.yaml").read_text())
    assert overlay == {"loop": {"samples": 2}}
    write_config(tmp_path, server.base_url, loop=overlay["loop"])
    snakemake(tmp_path, "all")
    corpus = tmp_path / "results/demo/corpus"
    summary = json.loads((corpus / "summary.json").read_text(encoding="utf-8"))
    # 2 queries x 36 chunks x 2 samples; 2 queries x 5 sessions = 10 groups of 2
    assert summary["turns"] == 144
    assert summary["advantages"]["groups"] == 10
    # where both samples answer alike (both k8s-namespace groups; a turn both got
    # right or wrong) the advantage is null with that reason, never 0
    adv = summary["advantages"]
    assert adv["null_traj"] == {"single_sample": 0, "zero_variance": 4}
    assert adv["null_turn"] == {"single_sample": 0, "zero_variance": 108}
    assert (adv["turns_with_advantage"], adv["turns_without_advantage"]) == (36, 108)
    check_a_group_by_hand(corpus)

    home = tmp_path / "home"  # every cache verl, datasets and transformers keep
    env = {
        **os.environ,
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
        # torch makes /tmp/torchinductor_$USER at import: keep it in tmp_path too
        "TMPDIR": str(home / "tmp"),
    }
    (home / "tmp").mkdir(parents=True)
    printed = shlex.split(
        subprocess.run(
            [str(Path(sys.executable).with_name("grumem")), "verl-config", "--corpus", str(corpus)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert f"reward.custom_reward_function.path={inspect.getfile(grumem.verl.reward)}" in printed
    overrides = [
        *printed,
        # apply the chat template to every row (the filter tokenizes each), dropping none
        "data.filter_overlong_prompts=True",
        f"+data.cache_dir={home / 'verl-cache'}",
    ]
    proc = subprocess.run(
        [str(VERL_PYTHON), str(CHECK), str(smollm2_gguf()), *overrides],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    # data.train_files is the train split: demo-01, -02 and -03 (7 + 5 + 3 chunks) x 2
    # queries x 2 samples
    assert seen["rows"] == 60, "RLHFDataset dropped rows"
    assert seen["templated"] == 60
    assert (seen["mismatch_count"], seen["mismatches"]) == (0, [])
    assert seen["pandas_mismatch_count"] == 0
    assert seen["has_chat_template"] and seen["vocab_size"] == 49152
    # verl's scores are the ones grumem computes for the same rows
    import pyarrow.parquet as pq

    rows = pq.read_table(corpus / "turns-train.parquet").to_pylist()
    assert seen["scores"] == [
        compute_score(
            r["data_source"], r["extra_info"]["response"], r["reward_model"]["ground_truth"],
            r["extra_info"],
        )["score"]
        for r in rows
    ]  # fmt: skip
    print(f"verl check: {seen['total_s']} s (tokenizer {seen['tokenizer_s']} s)")
