"""Shared by the tests."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grumem.core.json_text import dumps
from grumem.corpus.log_reader import TRAJECTORY_FIELDS
from grumem.corpus.turn_rows import ADVANTAGES, turn_rows, turn_size
from grumem.io.jsonl import read_jsonl
from grumem.records.trajectory import Trajectory
from grumem.stages.export import TRAJECTORIES, ExportInputs, export
from grumem.stages.kappa import run_kappa
from support.checkout import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "export"


FILES = ("log.jsonl", "labels.jsonl", "calibration.jsonl", "chunks.jsonl")


def calibrate(work: Path) -> None:
    run_kappa(
        str(work / "labels.jsonl"),
        str(work / "calibration.jsonl"),
        10,
        str(work / "kappa.json"),
        queries_path=FIXTURE / "queries.yaml",
        chunk_paths=[work / "chunks.jsonl"],
    )


T2 = "demo/q1/s-beta/0"  # the a4 trajectory, with the unparsed turn at t=3


def work_dir(tmp_path: Path) -> Path:
    """The fixture copied to `tmp_path`, with its kappa.json (the `work` fixture)."""
    for name in FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    calibrate(tmp_path)
    return tmp_path


def exported_trajectories(work: Path) -> list[dict[str, Any]]:
    """The fixture's trajectories as exported, plus one with a re-ask and an abort (the
    `corpus` fixture)."""
    work_dir(work)
    export(inputs(work))
    records = trajectories(work / "corpus")
    extra = copy.deepcopy(records[0])
    turn = extra["turns"][0]
    turn["earlier_asks"] = [
        {
            "ask": 0,
            "request_sha256": "x",
            "response": None,
            "parsed": False,
            "parse_error": {"tag": "response", "reason": "no answer", "raw": ""},
        }
    ]
    extra["aborted"] = {"t": 3, "reason": "budget", "component": "section"}
    extra["r_exit"], extra["r_exit_reason"] = None, "aborted"
    return [*records, extra]


def trajectories(out: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(out / TRAJECTORIES, "trajectory"))


def by_id(out: Path) -> dict[str, dict[str, Any]]:
    return {t["trajectory_id"]: t for t in trajectories(out)}


def exported(work: Path) -> Path:
    export(inputs(work))
    return work / "corpus"


def assert_nothing_written(out: Path) -> None:
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())


def sessions_inputs(work: Path, out: str = "corpus", **kw: Any) -> ExportInputs:
    """The export given what sessions.parquet needs: the queries, chunks and project."""
    return inputs(
        work,
        out,
        chunks=(str(work / "chunks.jsonl"),),
        queries=str(FIXTURE / "queries.yaml"),
        project="demo",
        **kw,
    )


def export_command(work: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`grumem export` of the fixture to `out` in a process of its own, as a job runs it."""
    settings = '{"export": {"min_kappa": 0.6, "data_source": "demo"}}'
    args = ["export", "--turn-log", str(work / "log.jsonl"), "--labels", str(work / "labels.jsonl")]
    args += ["--kappa", str(work / "kappa.json"), "--settings", settings, "--out-dir", str(out)]
    return subprocess.run(
        [sys.executable, "-m", "grumem.cli", *args], capture_output=True, text=True, timeout=120
    )


def drop_label(work: Path, query_id: str, sha: str) -> None:
    """No label for (query_id, chunk sha) in the labels nor in the calibration, and the
    κ of what is left (a pair the judge could not label has neither)."""
    for name in ("labels.jsonl", "calibration.jsonl"):
        lines = (work / name).read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [x for x in lines if not (sha in x and f'"{query_id}"' in x)]
        assert len(kept) == len(lines) - 1
        (work / name).write_text("".join(kept), encoding="utf-8")
    calibrate(work)


def inputs(work: Path, out: str = "corpus", **kw) -> ExportInputs:
    return ExportInputs(
        log=str(work / "log.jsonl"),
        labels=str(work / "labels.jsonl"),
        kappa=str(work / "kappa.json"),
        out_dir=str(work / out),
        **kw,
    )


def log_lines(work: Path) -> list[dict]:
    return list(read_jsonl(work / "log.jsonl", "log"))


def rewrite_log(work: Path, edit) -> None:
    lines = [edit(i, rec) for i, rec in enumerate(log_lines(work), start=1)]
    (work / "log.jsonl").write_text(
        "".join(dumps(r) + "\n" for r in lines if r is not None), encoding="utf-8"
    )


# ------------------------------------------------- verl's rows, one dict a turn


def verl_rows(
    data_source: str, ability: str, record: Trajectory, first_index: int
) -> Iterator[tuple[dict[str, Any], int]]:
    """A trajectory's verl rows, one dict a turn, with their sizes: the oracle of the
    export's columnar build (grumem.corpus.turn_rows); `first_index` is its first
    row's place in the file."""
    traj = record.to_dict()
    exit_gates = [turn["exit_gate"] for turn in traj["turns"]]
    # r_format of a new answer to turn t also needs every other recorded ask
    failures = sum(
        not ask["parsed"] for turn in traj["turns"] for ask in (*turn["earlier_asks"], turn)
    )
    for i, turn in enumerate(traj["turns"]):
        others_parsed = failures - (not turn["parsed"]) == 0
        row = verl_row(data_source, ability, traj, turn, first_index + i, exit_gates, others_parsed)
        yield row, turn_size(turn_rows(record, first_index)[i])


def verl_row(
    data_source: str,
    ability: str,
    traj: dict[str, Any],
    turn: dict[str, Any],
    index: int,
    exit_gates: list[bool | None],
    other_asks_parsed: bool,
) -> dict[str, Any]:
    """One turn's verl row; `index` (verl's extra_info.index) is its place in the file,
    `exit_gates` the trajectory's recorded exit gates and `other_asks_parsed` whether
    every ask of the trajectory but this turn's answer parsed."""
    return {
        "data_source": data_source,
        "prompt": turn["prompt"],
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": "yes" if turn["label"] else "no"},
        "extra_info": {
            "split": traj["split"],
            "index": index,
            "trajectory_id": traj["trajectory_id"],
            "t": turn["t"],
            "chunk_sha": turn["chunk_sha"],
            "label": turn["label"],
            "response": turn["response"],
            "r_update": turn["r_update"],
            "r_exit": traj["r_exit"],
            "r_exit_reason": traj["r_exit_reason"],
            "r_format": traj["r_format"],
            "r_outcome": traj["r_outcome"],
            "t_exit": traj["t_exit"],
            "t_last_evidence": traj["t_last_evidence"],
            "parsed": turn["parsed"],
            "update_gate": turn["update_gate"],
            "exit_gate": turn["exit_gate"],
            "attempt": turn["attempt"],
            "asks": turn["asks"],
            "request_sha256": turn["request_sha256"],
            "response_model": turn["response_model"],
            **{name: traj[name] for name in TRAJECTORY_FIELDS},
            "aborted": traj["aborted"] is not None,
            "exit_gates": exit_gates,
            "other_asks_parsed": other_asks_parsed,
            **{name: turn[name] for name in ADVANTAGES},
        },
    }
