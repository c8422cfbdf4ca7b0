"""The corpus export: log + labels + kappa.json → verl-ready corpus.

Reads log.jsonl as a stream, one trajectory in memory at a time, and writes
under the output directory:

- `trajectories.jsonl`: the trajectory record, one line per trajectory
  in the log's order, with the exact recorded chat messages as each turn's
  prompt and `r_outcome: null`;
- `turns.parquet`: one row per turn in verl's RL dataset shape (`data_source`,
  `prompt` as chat messages, `ability`, `reward_model`, `extra_info`, with
  what grumem.verl.reward needs to score a new answer), written in row groups
  as the stream goes;
- `sessions.parquet` (given the queries and the chunk files): one row per
  (project, query, session) for online training of the loop itself
  (grumem.corpus.rollout_rows), its chunks rendered as the prompts stage fills
  `{chunk}`, each chunk's label joined by chunk_sha; every chunk of every
  session needs a label;
- `summary.json`: the corpus's counts, also printed;
- `README.md`: the dataset card (grumem.corpus.card).

Every turn carries the paper's advantages (grumem.core.advantages), normalised
within the samples of one (project, query, session). Those need not be
adjacent in the log, so the log is read twice: a scoring pass keeps a few
numbers per trajectory (rewards only, no recording read), then the full pass
writes the corpus with the advantages filled in.

Prompts are the recorded request bodies, checked against their sha256 and
never re-assembled: a template change after the run would otherwise train
the policy on prompts the model never saw. Responses likewise: each turn's
text is derived from its sha-checked recorded body (grumem.core.recording), and a
log whose `content` disagrees with that body is refused. All the files are
written to temporary names and renamed only when the whole log has been read
without error; on refusal or error nothing is left in the output directory,
and nothing is ever written next to the inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from grumem.config.settings import load_queries, settings_from_args
from grumem.core.advantages import ALPHA, ROW
from grumem.core.evidence import Labels
from grumem.core.json_text import sha256_text
from grumem.core.rollout_row import ABILITY
from grumem.core.template import Budget
from grumem.corpus.advantage_table import AdvantageTable, Scores
from grumem.corpus.card import CARD, card_text
from grumem.corpus.kappa_gate import check_kappa
from grumem.corpus.log_reader import LogReader, group_trajectories
from grumem.corpus.rollout_rows import (
    SESSIONS,
    SESSIONS_SCHEMA,
    RowSettings,
    SessionChunks,
    check_session_labels,
    rollout_rows,
    write_rollout_rows,
)
from grumem.corpus.summary import Summary, format_summary
from grumem.corpus.trajectory import (
    MISSING_SHOWN,
    Missing,
    check_trajectory,
    record_bytes,
    trajectory,
)
from grumem.corpus.turn_rows import PARQUET_SCHEMA, ParquetSink
from grumem.errors import ExportRefused, GrumemError, MissingLabelsError
from grumem.io.jsonl import atomic_files, sha256_file
from grumem.io.labels import load_labels
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_template
from grumem.io.typed import checked_document
from grumem.records.return_weights import EQUAL_WEIGHTS, ReturnWeights
from grumem.records.summary import CorpusSummary

__all__ = ["SESSIONS", "SUMMARY", "TRAJECTORIES", "TURNS", "ExportInputs", "ExportRefused"]
__all__ += ["export", "format_summary", "main"]

TRAJECTORIES = "trajectories.jsonl"
TURNS = "turns.parquet"
SUMMARY = "summary.json"


@dataclass(frozen=True)
class ExportInputs:
    log: str
    labels: str
    kappa: str
    out_dir: str
    min_kappa: float = 0.6
    data_source: str = "grumem"
    ability: str = ABILITY
    chunks: tuple[str, ...] = ()
    alpha: float = ALPHA
    return_weights: ReturnWeights = EQUAL_WEIGHTS
    turn_weighting: str = ROW
    template: str | None = None  # the prompts' template, named in the dataset card
    # sessions.parquet, written when the queries are given (with the chunk files): the
    # project's name and queries, and the run's settings its rows carry
    queries: str | None = None
    project: str | None = None
    level: str = "L1"
    budget: Budget = Budget()
    system: str | None = None


def export(inputs: ExportInputs) -> dict[str, Any]:
    """Run the export; return the summary. Raises before renaming anything into place."""
    for what, p in (("log", inputs.log), ("labels", inputs.labels)):
        if not os.path.exists(p):
            raise GrumemError(f"{what} file {p} does not exist")
    kappa = check_kappa(inputs.kappa, inputs.labels, inputs.min_kappa)
    labels = load_labels(inputs.labels)
    chunks = SessionChunks(inputs.chunks) if inputs.chunks else None
    sessions = None if chunks is None else chunks.shas

    table = AdvantageTable(
        _score(inputs, labels, sessions),
        inputs.alpha,
        inputs.return_weights,
        inputs.turn_weighting,
    )
    rows = None if inputs.queries is None else _rollout_rows(inputs, chunks, labels)
    reader = LogReader(inputs.log)
    summary = Summary(advantages=table.summary)
    # summary.json first: it is renamed last, so its presence means the corpus is complete
    files: tuple[tuple[str, str], ...] = (
        (SUMMARY, "w"),
        (CARD, "w"),
        (TRAJECTORIES, "wb"),
        (TURNS, "wb"),
    )
    if rows is not None:
        files += ((SESSIONS, "wb"),)
    with atomic_files(inputs.out_dir, files) as out:
        sink = ParquetSink(out[TURNS])
        try:
            _export_stream(
                inputs, reader, labels, sessions, summary, sink, out[TRAJECTORIES], table
            )
            sink.flush()
        finally:
            sink.close()
        if rows is not None:
            write_rollout_rows(out[SESSIONS], rows)
        if summary.turns == 0:
            raise GrumemError(
                f"{inputs.log}: no trainable turns to export"
                f" ({summary.trajectories_in_log} trajectories, all aborted"
                " before their first answer)"
            )
        result = summary.as_dict(
            {
                "data_source": inputs.data_source,
                "ability": inputs.ability,
                "log": inputs.log,
                "log_sha256": reader.sha256.hexdigest(),
                "labels": inputs.labels,
                "labels_sha256": kappa.labels_sha256,
                "kappa": kappa.kappa,
                "kappa_n": kappa.n,
                "min_kappa": inputs.min_kappa,
                "t_last_evidence_over": "session chunks"
                if sessions is not None
                else "recorded turns",
            }
        )
        checked_document(result, CorpusSummary, Path(inputs.out_dir) / SUMMARY)
        out[SUMMARY].write(json.dumps(result, ensure_ascii=False, indent=2))
        out[SUMMARY].write("\n")
        template = None
        if inputs.template is not None:
            template = (os.path.basename(inputs.template), sha256_file(inputs.template))
        out[CARD].write(
            card_text(
                result,
                PARQUET_SCHEMA,
                summary.models,
                summary.response_models,
                template,
                None if rows is None else SESSIONS_SCHEMA,
            )
        )
    return result


def _rollout_rows(
    inputs: ExportInputs, chunks: SessionChunks | None, labels: Labels
) -> Iterator[dict[str, Any]]:
    """sessions.parquet's rows, generated as it is written; its labels are checked here,
    before any file is opened."""
    if chunks is None or inputs.project is None or inputs.queries is None:
        raise GrumemError(
            f"--queries {inputs.queries}: sessions.parquet is built from the project's chunk"
            " files and names the project: give --chunks and --project too"
        )
    queries = load_queries(inputs.queries)
    check_session_labels(inputs.project, queries, chunks, labels, inputs.labels)
    settings = RowSettings(
        level=inputs.level,
        budget=inputs.budget,
        # the text the prompts stage filled, hashed as the agent loop checks it
        template_sha256=sha256_text(load_template(inputs.template or GRU_MEM_TEMPLATE)),
        system=inputs.system,
        alpha=inputs.alpha,
        return_weights=inputs.return_weights,
        turn_weighting=inputs.turn_weighting,
        data_source=inputs.data_source,
        ability=inputs.ability,
    )
    return rollout_rows(inputs.project, queries, chunks, labels, settings)


def _score(inputs: ExportInputs, labels: Labels, sessions: dict[str, list[str]] | None) -> Scores:
    """The scoring pass: what the advantages need of every trajectory to export."""
    out = Scores()
    missing = Missing()
    for traj in group_trajectories(inputs.log, iter(LogReader(inputs.log, hash=False))):
        record = trajectory(inputs.log, traj, labels, sessions, missing, rewards_only=True)
        if record is not None and not missing:
            out.add(record)
    _raise_missing(inputs, missing)
    return out


def _export_stream(
    inputs: ExportInputs,
    reader: LogReader,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    summary: Summary,
    sink: ParquetSink,
    out: IO[bytes],
    table: AdvantageTable,
) -> None:
    missing = Missing()
    for traj in group_trajectories(inputs.log, iter(reader)):
        summary.trajectories_in_log += 1
        record = trajectory(inputs.log, traj, labels, sessions, missing)
        if traj.abort is not None:
            summary.aborted[traj.abort[1]["abort"]["reason"]] += 1
            if record is None and not traj.turns:
                summary.aborted_without_turns += 1
        if record is None or missing:
            continue  # keep reading to count every missing label, write nothing more
        table.fill(record)
        check_trajectory(record)
        out.write(record_bytes(record))
        out.write(b"\n")
        first_index = summary.turns  # verl's extra_info.index: the row's place in the file
        summary.add(record)
        sink.add_trajectory(inputs.data_source, inputs.ability, record, first_index)
    _raise_missing(inputs, missing)


def _raise_missing(inputs: ExportInputs, missing: Missing) -> None:
    if missing:
        count = missing.turns + missing.chunks
        raise MissingLabelsError(
            inputs.labels,
            count,
            missing.examples,
            MISSING_SHOWN,
            what=f"{missing.turns} turn(s)"
            + (f" and {missing.chunks} unvisited session chunk(s)" if missing.chunks else ""),
        )


def main(args: argparse.Namespace) -> int:
    """`grumem export`: the corpus; its summary to stderr (the job's log)."""
    settings = settings_from_args(args)
    s = settings["export"]
    weights = s["return_weights"]
    # floats, as the schema's `number` may be written 1: min_kappa goes into summary.json
    summary = export(
        ExportInputs(
            log=args.turn_log,
            labels=args.labels,
            kappa=args.kappa,
            out_dir=args.out_dir,
            min_kappa=float(s["min_kappa"]),
            data_source=s["data_source"],
            chunks=tuple(args.chunks),
            alpha=float(s["alpha"]),
            return_weights=ReturnWeights(
                float(weights["r_update"]), float(weights["r_exit"]), float(weights["r_format"])
            ),
            turn_weighting=s["turn_weighting"],
            template=args.template,
            queries=args.queries,
            project=args.project,
            level=settings["loop"]["level"],
            budget=Budget.from_config(settings["budget"]),
            system=settings["llm"]["system"],
        )
    )
    print(format_summary(summary), file=sys.stderr)
    return 0
