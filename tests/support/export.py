"""Shared by the tests."""

from __future__ import annotations

from pathlib import Path

from grumem.core.json_text import dumps
from grumem.io.jsonl import read_jsonl
from grumem.stages.export import (
    ExportInputs,
)
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
