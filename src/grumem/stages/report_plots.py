"""Corpus plots for `snakemake --report`: self-contained SVG bar charts, streamed from the run.

The log and the corpus trajectories are read one line at a time (validated by
the compiled schema) into the tallies of grumem.report.corpus_charts, which
computes the four charts (grumem.report.corpus_charts.PLOTS); grumem.report.plots draws each as SVG
with matplotlib, so the same inputs always give the same bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from grumem.errors import RecordError
from grumem.io.jsonl import atomic_writer, read_jsonl_fast
from grumem.report.corpus_charts import CorpusTally, LogTally, corpus_charts
from grumem.report.plots import BarChart, render_svg


def tally_log(path: str | os.PathLike[str]) -> LogTally:
    """The log's counts; a line whose status is ok must have its response."""
    tally = LogTally()
    for lineno, _, line in read_jsonl_fast(str(path), "log"):
        if line["status"] == "ok" and line["response"] is None:
            raise RecordError(path, lineno, "response", "status is ok but response is null")
        tally.add(line)
    return tally


def tally_corpus(path: str | os.PathLike[str]) -> CorpusTally:
    """The corpus trajectories' counts."""
    tally = CorpusTally()
    for _, _, traj in read_jsonl_fast(str(path), "trajectory"):
        tally.add(traj)
    return tally


def charts(log: str | os.PathLike[str], trajectories: str | os.PathLike[str]) -> list[BarChart]:
    """The four charts of the log and the trajectories, in PLOTS order."""
    return corpus_charts(tally_corpus(trajectories), tally_log(log))


def write_plots(
    log: str | os.PathLike[str],
    trajectories: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
) -> Sequence[Path]:
    """Write every plot (corpus_charts.PLOTS) into `out_dir`, each atomically; their paths."""
    paths = []
    for chart in charts(log, trajectories):
        path = Path(out_dir) / f"{chart.name}.svg"
        with atomic_writer(path) as f:
            f.write(render_svg(chart))
        paths.append(path)
    return paths


def main(args: argparse.Namespace) -> int:
    """`grumem report-plots`: the corpus plots, one SVG file each."""
    for path in write_plots(args.turn_log, args.trajectories, args.out_dir):
        print(f"report-plots: wrote {path}", file=sys.stderr)
    return 0
