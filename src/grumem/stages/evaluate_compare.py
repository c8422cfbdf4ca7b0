"""`grumem evaluate-compare`: policies compared from turn logs that already exist.

Each `--run NAME=LOG` is one policy's log.jsonl (two projects' logs, or two
recorded runs of one project); nothing is sent to any model. Every log is read
as the export reads it (lines checked, grouped into trajectories), each turn
joined to its label by (query_id, chunk_sha), each trajectory checked against
its session's chunks in the chunk files, whose labels give t_last_evidence over
the whole session. grumem.core.evaluation computes the figures and the pairs.

Writes compare.json (checked as its record, workflow/schemas/compare.schema.yaml),
compare.md (grumem.report.evaluation_table) and, with --plots-dir, the plots of
grumem.report.evaluation_plots. Everything is computed before anything is
written, each file atomically, compare.json last: bad input (a name given twice,
a turn without a label, a log without trajectories) leaves no output behind.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from grumem.core.evaluation import (
    RunSource,
    TrajectoryKey,
    TrajectoryOutcome,
    compare,
    trajectory_outcome,
)
from grumem.core.evidence import Labels
from grumem.corpus.log_reader import LogReader, group_trajectories
from grumem.corpus.trajectory import MISSING_SHOWN, Missing, session_evidence
from grumem.errors import GrumemError, MissingLabelsError, RecordError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import atomic_writer, sha256_file, write_json
from grumem.io.labels import load_labels
from grumem.io.tokenizer import cl100k_tokens
from grumem.io.typed import checked_document
from grumem.records.compare import CompareResult
from grumem.report.evaluation_plots import PLOTS, charts
from grumem.report.evaluation_table import render_markdown
from grumem.report.plots import render_svg

__all__ = ["evaluate_compare", "main", "parse_runs"]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def parse_runs(runs: Sequence[str]) -> list[tuple[str, str]]:
    """(name, log) of each `NAME=LOG`, in the order given; a malformed or repeated name
    is an error naming it."""
    out: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for run in runs:
        name, sep, log = run.partition("=")
        if not sep or not log:
            raise GrumemError(f"--run {run}: expected NAME=LOG_JSONL (a policy's name and its log)")
        if not NAME.fullmatch(name):
            raise GrumemError(
                f"--run {run}: the name {name!r} must be letters, digits, '.', '_' or '-',"
                " starting with a letter or digit"
            )
        if name in seen:
            raise GrumemError(
                f"--run {run}: policy {name!r} is named twice (also --run {name}={seen[name]});"
                " give each run a name of its own"
            )
        seen[name] = log
        out.append((name, log))
    return out


def read_run(
    name: str,
    path: str,
    labels: Labels,
    sessions: dict[str, list[str]],
    count_tokens: Callable[[str], int],
) -> tuple[RunSource, list[TrajectoryOutcome]]:
    """One policy's trajectories as outcomes. Turns and session chunks without a label
    are counted and refused all at once, naming file and line as the export does."""
    if not os.path.isfile(path):
        raise GrumemError(f"--run {name}={path}: the log does not exist")
    reader = LogReader(path)
    missing = Missing()
    outcomes: list[TrajectoryOutcome] = []
    keys: dict[TrajectoryKey, str] = {}
    for traj in group_trajectories(path, iter(reader)):
        lineno, first = traj.first_line
        key = (first.query_id, first.session, first.sample)
        if key in keys:
            raise RecordError(
                path,
                lineno,
                "trajectory_id",
                f"{first.trajectory_id!r} has the (query_id, session, sample) of"
                f" {keys[key]!r}: a policy runs each once (one project's log per --run)",
            )
        keys[key] = first.trajectory_id
        for ln, rec in traj.turns:
            if labels.get(rec.query_id, rec.chunk_sha) is None:
                where = f"{path}:{ln} {rec.trajectory_id} t={rec.t}"
                missing.add("turn", where, rec.query_id, rec.chunk_sha)
        session_evidence(path, traj, labels, sessions, missing)
        if missing:
            continue  # read on to count every missing label
        lines = [rec for _, rec in traj.turns]
        if traj.abort is not None:
            lines.append(traj.abort[1])
        outcomes.append(trajectory_outcome(lines, labels, sessions[first.session], count_tokens))
    if missing:
        raise MissingLabelsError(
            labels.path,
            missing.turns + missing.chunks,
            missing.examples,
            MISSING_SHOWN,
            what=f"{missing.turns} turn(s) and {missing.chunks} session chunk(s) of {path}",
        )
    if not outcomes:
        raise GrumemError(f"--run {name}={path}: the log holds no trajectory to measure")
    return RunSource(path, reader.sha256.hexdigest()), outcomes


def _check_outputs(outputs: Sequence[str], inputs: Sequence[str]) -> None:
    """No command writes to a file it reads."""
    for out in outputs:
        for inp in inputs:
            if os.path.exists(out) and os.path.exists(inp) and os.path.samefile(out, inp):
                raise GrumemError(
                    f"{out}: is also an input ({inp}); write the comparison elsewhere"
                )


def evaluate_compare(
    runs: Sequence[tuple[str, str]],
    labels_path: str,
    chunk_paths: Sequence[str],
    out_json: str,
    out_md: str,
    plots_dir: str | None = None,
) -> CompareResult:
    """Read, compute, write; return the record written to `out_json`."""
    inputs = [log for _, log in runs] + [labels_path, *chunk_paths]
    outputs = [out_json, out_md]
    if plots_dir is not None:
        outputs += [str(Path(plots_dir) / name) for name in PLOTS]
    _check_outputs(outputs, inputs)
    labels = load_labels(labels_path)
    sessions = {session: [c.sha for c in chunks] for session, chunks in iter_sessions(chunk_paths)}
    count = cl100k_tokens().count_cached
    read = {name: read_run(name, log, labels, sessions, count) for name, log in runs}
    result = compare(read, labels_path, sha256_file(labels_path), len(sessions))
    document = result.to_dict()
    checked_document(document, CompareResult, out_json)  # validated as written
    markdown = render_markdown(result)
    svgs = [] if plots_dir is None else [(c.name, render_svg(c)) for c in charts(result)]
    for name, svg in svgs:
        with atomic_writer(Path(str(plots_dir)) / f"{name}.svg") as f:
            f.write(svg)
    with atomic_writer(out_md) as f:
        f.write(markdown)
    write_json(out_json, document)  # last: its presence means the comparison is complete
    return result


def main(args: argparse.Namespace) -> int:
    """`grumem evaluate-compare`: compare.json, compare.md and the plots; a line per
    output to stderr (the job's log)."""
    result = evaluate_compare(
        parse_runs(args.run), args.labels, args.chunks, args.out_json, args.out_md, args.plots_dir
    )
    names = ", ".join(result.policies)
    print(
        f"evaluate-compare: {len(result.policies)} policies ({names}),"
        f" {len(result.pairs)} pairs -> {args.out_json}, {args.out_md}"
        + (f", {args.plots_dir}" if args.plots_dir else ""),
        file=sys.stderr,
    )
    return 0
