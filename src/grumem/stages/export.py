"""The corpus export: log + labels + kappa.json → verl-ready corpus.

Reads log.jsonl as a stream, one trajectory in memory at a time, and writes
under the output directory:

- `trajectories.jsonl`: one line per trajectory (grumem.records.trajectory), in
  the log's order, with the exact recorded chat messages as each turn's prompt
  and `r_outcome: null`;
- `turns.parquet`: one row per turn in verl's RL dataset shape (`data_source`,
  `prompt` as chat messages, `ability`, `reward_model`, `extra_info`, with
  what grumem.verl.reward needs to score a new answer), written in row groups
  as the stream goes;
- `sessions.parquet` (given the queries and the chunk files): one row per
  (project, query, session) for online training of the loop itself
  (grumem.corpus.rollout_rows), its chunks rendered as the prompts stage fills
  `{chunk}`, each chunk's label joined by chunk_sha; every chunk of every
  session needs a label;
- `turns-{split}.parquet` and `sessions-{split}.parquet` for train, val and test:
  the same rows, each in the file of its session's split (grumem.core.split; a
  split without rows gets a file of no rows). verl 0.9.1's RLHFDataset loads every
  file of data.train_files / data.val_files whole and filters no column, so a
  split it trains or validates on must be a file of its own;
- `summary.json`: the export's counts (grumem.records.summary), also printed;
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
from grumem.core.split import SPLITS, Split, SplitName, split_file
from grumem.core.template import Budget
from grumem.corpus.advantage_table import AdvantageTable, Scores
from grumem.corpus.card import CARD, SplitTable, card_text
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
from grumem.corpus.trajectory import MISSING_SHOWN, Missing, score, trajectory
from grumem.corpus.turn_rows import PARQUET_SCHEMA, turn_rows, turn_rows_writer
from grumem.errors import ExportRefused, GrumemError, MissingLabelsError
from grumem.io.jsonl import atomic_files, sha256_file
from grumem.io.labels import load_labels
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_template
from grumem.io.typed import encode_checked
from grumem.records.return_weights import EQUAL_WEIGHTS, ReturnWeights
from grumem.records.rollout_row import RolloutRow
from grumem.records.summary import CorpusSummary, Inputs
from grumem.records.trajectory import Trajectory

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
    split: Split = Split()  # the project's train / val / test split


def export(inputs: ExportInputs) -> CorpusSummary:
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
    summary = Summary()
    # summary.json first: it is renamed last, so its presence means the corpus is complete
    files: tuple[tuple[str, str], ...] = (
        (SUMMARY, "w"),
        (CARD, "w"),
        (TRAJECTORIES, "wb"),
        (TURNS, "wb"),
        *((split_file(TURNS, s), "wb") for s in SPLITS),
    )
    if rows is not None:
        files += ((SESSIONS, "wb"), *((split_file(SESSIONS, s), "wb") for s in SPLITS))
    counts = SplitCounts.of(inputs.split, sessions)
    with atomic_files(inputs.out_dir, files) as out:
        sinks = TurnSinks(out, inputs)
        try:
            _export_stream(
                inputs, reader, labels, sessions, summary, sinks, out[TRAJECTORIES], table, counts
            )
            sinks.flush()
        finally:
            sinks.close()
        if rows is not None:
            split_sinks = {
                s: (out[split_file(SESSIONS, s)], inputs.split.metadata(inputs.project, s))
                for s in SPLITS
            }
            counts.rows = write_rollout_rows(out[SESSIONS], rows, split_sinks)
        if summary.turns == 0:
            raise GrumemError(
                f"{inputs.log}: no trainable turns to export"
                f" ({summary.trajectories_in_log} trajectories, all aborted"
                " before their first answer)"
            )
        result = summary.record(
            table.summary,
            Inputs(
                data_source=inputs.data_source,
                ability=inputs.ability,
                log=inputs.log,
                log_sha256=reader.sha256.hexdigest(),
                labels=inputs.labels,
                labels_sha256=kappa.labels_sha256,
                kappa=kappa.kappa,
                kappa_n=kappa.n,
                min_kappa=inputs.min_kappa,
                t_last_evidence_over="session chunks" if sessions is not None else "recorded turns",
            ),
        )
        encode_checked(result, CorpusSummary, Path(inputs.out_dir) / SUMMARY, None)
        out[SUMMARY].write(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
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
                splits=counts.table(inputs.split),
            )
        )
    return result


class TurnSinks:
    """turns.parquet and its split files: a trajectory's rows go to both of its files."""

    def __init__(self, out: dict[str, IO[Any]], inputs: ExportInputs):
        source, ability = inputs.data_source, inputs.ability
        self.all = turn_rows_writer(out[TURNS], source, ability)
        self.by_split = {
            s: turn_rows_writer(
                out[split_file(TURNS, s)], source, ability, inputs.split.metadata(inputs.project, s)
            )
            for s in SPLITS
        }

    def add(self, record: Trajectory) -> None:
        # one index in every file: the row's place in turns.parquet
        for row in turn_rows(record, self.all.written):
            self.all.add(row)
            self.by_split[record.split].add(row)

    def flush(self) -> None:
        for sink in (self.all, *self.by_split.values()):
            sink.flush()

    def close(self) -> None:
        for sink in (self.all, *self.by_split.values()):
            sink.close()


@dataclass
class SplitCounts:
    """What each split holds, for the dataset card: sessions (of the chunk files, else
    of the log), trajectories, turns and sessions rows."""

    sessions: dict[SplitName, set[str]]
    trajectories: dict[SplitName, int]
    turns: dict[SplitName, int]
    rows: dict[SplitName, int] | None = None

    @classmethod
    def of(cls, split: Split, sessions: dict[str, list[str]] | None) -> SplitCounts:
        out = cls({s: set() for s in SPLITS}, dict.fromkeys(SPLITS, 0), dict.fromkeys(SPLITS, 0))
        for session in sessions or ():
            out.sessions[split.of(session)].add(session)
        return out

    def add(self, record: Trajectory) -> None:
        split = record.split
        self.sessions[split].add(record.session)
        self.trajectories[split] += 1
        self.turns[split] += len(record.turns)

    def table(self, split: Split) -> SplitTable:
        return SplitTable(
            split.describe(),
            {
                s: {
                    "sessions": len(self.sessions[s]),
                    "trajectories": self.trajectories[s],
                    "turns": self.turns[s],
                    **({} if self.rows is None else {"sessions rows": self.rows[s]}),
                }
                for s in SPLITS
            },
        )


def _rollout_rows(
    inputs: ExportInputs, chunks: SessionChunks | None, labels: Labels
) -> Iterator[RolloutRow]:
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
        split=inputs.split,
    )
    return rollout_rows(inputs.project, queries, chunks, labels, settings)


def _score(inputs: ExportInputs, labels: Labels, sessions: dict[str, list[str]] | None) -> Scores:
    """The scoring pass: what the advantages need of every trajectory to export."""
    out = Scores()
    missing = Missing()
    for traj in group_trajectories(inputs.log, iter(LogReader(inputs.log, hash=False))):
        scored = score(inputs.log, traj, labels, sessions, missing)
        if scored is not None and not missing:
            out.add(scored.trajectory_id, scored.for_advantages())
    _raise_missing(inputs, missing)
    return out


def _export_stream(
    inputs: ExportInputs,
    reader: LogReader,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    summary: Summary,
    sink: TurnSinks,
    out: IO[bytes],
    table: AdvantageTable,
    counts: SplitCounts,
) -> None:
    missing = Missing()
    path = Path(inputs.out_dir) / TRAJECTORIES
    for traj in group_trajectories(inputs.log, iter(reader)):
        summary.trajectories_in_log += 1
        scored = score(inputs.log, traj, labels, sessions, missing)
        aborted = traj.aborted
        if aborted is not None:
            summary.aborted[aborted.reason] += 1
            if scored is None and not traj.turns:
                summary.aborted_without_turns += 1
        if scored is None or missing:
            continue  # keep reading to count every missing label, write nothing more
        pairs = zip(scored.turn_numbers(), scored.rewards.r_update, strict=True)
        record = trajectory(
            inputs.log, scored, table.next(scored.trajectory_id, list(pairs)), inputs.split
        )
        out.write(encode_checked(record, Trajectory, path, summary.trajectories + 1))
        out.write(b"\n")
        sink.add(record)
        summary.add(record)
        counts.add(record)
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
            split=Split.from_config(settings["split"]),
        )
    )
    print(format_summary(summary), file=sys.stderr)
    return 0
