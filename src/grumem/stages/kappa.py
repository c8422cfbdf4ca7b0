"""Stage `kappa`: Cohen's κ of the labels against an independent calibration,
written to kappa.json, which the export requires (grumem.core.kappa computes it)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from grumem.config.settings import load_queries, settings_from_args
from grumem.core.kappa import Kappa, check_in_project, check_independent, kappa_between
from grumem.errors import GrumemError, KappaError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import sha256_file, write_json
from grumem.io.labels import load_labels
from grumem.io.typed import checked_document, read_records
from grumem.records.kappa import KappaCalibration
from grumem.records.label import Label


def main(args: argparse.Namespace) -> int:
    """`grumem kappa`: kappa.json, its statistics to stderr (the job's log)."""
    r = run_kappa(
        args.labels,
        args.calibration,
        settings_from_args(args)["export"]["min_calibration"],
        args.out,
        queries_path=args.queries,
        chunk_paths=args.chunks,
    )
    print(
        f"kappa: {r['kappa']:.4f} over {r['n']} pairs (observed {r['observed_agreement']:.4f},"
        f" expected {r['expected_agreement']:.4f}) -> {args.out}",
        file=sys.stderr,
    )
    return 0


def kappa_record(
    result: Kappa, labels_path: str, calibration_path: str, min_calibration: int
) -> dict[str, Any]:
    """kappa.json's content: no timestamps, paths as given, so reruns are byte-identical."""
    return {
        "kappa": result.kappa,
        "n": result.n,
        "observed_agreement": result.observed_agreement,
        "expected_agreement": result.expected_agreement,
        "confusion": result.confusion.as_dict(),
        "min_calibration": min_calibration,
        "labels_path": labels_path,
        "labels_sha256": sha256_file(labels_path),
        "calibration_path": calibration_path,
        "calibration_sha256": sha256_file(calibration_path),
    }


def project_pairs(
    queries_path: str | os.PathLike[str], chunk_paths: Sequence[str | os.PathLike[str]]
) -> tuple[set[str], set[str]]:
    """(query ids, chunk shas) of a project: its queries file and its chunk files."""
    if not chunk_paths:
        raise GrumemError("--chunks: give the project's chunk files (or directories)")
    query_ids = {q["id"] for q in load_queries(queries_path)}
    shas = {c.sha for _, chunks in iter_sessions(chunk_paths) for c in chunks}
    if not shas:
        raise GrumemError(f"no chunks in {', '.join(map(str, chunk_paths))}")
    return query_ids, shas


def run_kappa(
    labels_path: str,
    calibration_path: str,
    min_calibration: int,
    out: str,
    *,
    queries_path: str | os.PathLike[str],
    chunk_paths: Sequence[str | os.PathLike[str]],
) -> dict[str, Any]:
    """Compute κ and write kappa.json atomically (nothing is written on error).

    The calibration is checked first: another annotator's, and only pairs of
    this project (its queries, its chunks)."""
    for what, p in (("labels", labels_path), ("calibration", calibration_path)):
        if not os.path.exists(p):
            raise GrumemError(f"{what} file {p} does not exist")
        if os.path.isdir(p):
            raise GrumemError(f"{what} file {p} is a directory, not a file")
    if os.path.samefile(labels_path, calibration_path):
        raise KappaError(
            f"--calibration {calibration_path} is the labels file itself: κ needs an"
            " independent labelling of a sample of the pairs"
        )
    labels = load_labels(labels_path)
    calibration = load_labels(calibration_path)
    check_independent(labels, calibration)
    query_ids, shas = project_pairs(queries_path, chunk_paths)
    rows = read_records(calibration_path, Label)
    check_in_project(str(calibration_path), rows, query_ids, shas)
    result = kappa_between(labels, calibration, min_calibration)
    record = kappa_record(result, str(labels_path), str(calibration_path), min_calibration)
    checked_document(record, KappaCalibration, out)
    write_json(out, record)
    return record
