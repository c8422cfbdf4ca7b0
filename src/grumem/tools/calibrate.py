"""`grumem calibrate-sample` and `grumem calibrate-finalize`: the calibration sample drawn
from the judge's labels and the chunk files, and the calibration file made from it once
a person filled it (the sampling and the checks are grumem.core.calibration's)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from grumem.config.settings import load_queries
from grumem.core.calibration import (
    SampleStats,
    calibration_labels,
    draw_pairs,
    format_sample_stats,
    sample_lines,
)
from grumem.core.chunk_text import distinct_chunks
from grumem.errors import GrumemError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import read_jsonl, write_jsonl
from grumem.io.labels import load_labels


def draw_sample(
    queries_path: str | os.PathLike[str],
    labels_path: str | os.PathLike[str],
    chunk_paths: Sequence[str | os.PathLike[str]],
    n: int,
    seed: int,
) -> tuple[list[dict[str, Any]], SampleStats]:
    """Up to n calibration-sample lines, deterministic for (inputs, n, seed)."""
    if n < 1:
        raise GrumemError(f"--n {n}: draw at least one pair")
    questions = {q["id"]: q["question"] for q in load_queries(queries_path)}
    labels = load_labels(labels_path)
    where = {c.sha: (c.session, c.index) for c in distinct_chunks(iter_sessions(chunk_paths))}
    picked, stats = draw_pairs(questions, labels, where, n, seed)
    # the drawn chunks' text in a second pass: the corpus is not held
    wanted = {sha for _, sha in picked}
    texts = {c.sha: c.text for c in distinct_chunks(iter_sessions(chunk_paths)) if c.sha in wanted}
    return sample_lines(picked, questions, where, texts), stats


def write_sample(
    queries_path: str | os.PathLike[str],
    labels_path: str | os.PathLike[str],
    chunk_paths: Sequence[str | os.PathLike[str]],
    n: int,
    seed: int,
    out: str | os.PathLike[str],
) -> SampleStats:
    lines, stats = draw_sample(queries_path, labels_path, chunk_paths, n, seed)
    write_jsonl(out, lines, "calibration-sample")
    return stats


def finalize(
    sample_path: str | os.PathLike[str], annotator: str, out: str | os.PathLike[str]
) -> tuple[int, int]:
    """Write the calibration file from a filled sample; return how many pairs it holds
    and how many were skipped (left out)."""
    path = str(sample_path)
    lines = enumerate(read_jsonl(path, "calibration-sample"), start=1)
    labels, skipped = calibration_labels(path, lines, annotator)
    return write_jsonl(out, labels, "label"), skipped


def main_sample(args: argparse.Namespace) -> int:
    """`grumem calibrate-sample`: a stratified sample of pairs to label by hand."""
    stats = write_sample(args.queries, args.labels, args.chunks, args.n, args.seed, args.out)
    print(format_sample_stats(stats, args.n, args.out), file=sys.stderr)
    return 0


def main_finalize(args: argparse.Namespace) -> int:
    """`grumem calibrate-finalize`: a filled sample -> the calibration file."""
    n, skipped = finalize(args.sample, args.annotator, args.out)
    print(
        f"calibrate-finalize: {n} labelled pairs ({skipped} skipped) -> {args.out}",
        file=sys.stderr,
    )
    return 0
