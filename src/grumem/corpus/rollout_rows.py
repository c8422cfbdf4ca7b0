"""sessions.parquet: one row per (project, query, session), what the online GRU-Mem
loop (grumem.verl's agent loop `grumem`) is trained from.

A row holds the question, the session's chunks rendered exactly as the prompts
stage fills `{chunk}` (grumem.core.chunk_text, with each chunk_sha), the evidence
label of every chunk joined by (query_id, chunk_sha), t_last_evidence, the level,
the budget and the template's sha256 (grumem.core.rollout_row builds it;
workflow/schemas/rollout-row.schema.yaml is its contract). Rows are sorted by
(session, query_id), so neither the shard rule nor the order of the chunk files
moves a row, and each chunk file is read about once.

The chunk texts are inline: a row is self-contained, so verl's workers need no
shared file system. verl copies a row's columns into the training row of every
turn of every rollout; grumem.verl.worker drops the texts from that copy (their
shas stay). scripts/bench_rollout_row.py measures both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

import pyarrow as pa

from grumem.core.advantages import ROW
from grumem.core.chunk_text import Chunk
from grumem.core.evidence import Labels
from grumem.core.json_text import sha256_text
from grumem.core.rollout_row import rollout_row
from grumem.core.split import SPLITS, Split, SplitName
from grumem.core.template import Budget
from grumem.corpus.trajectory import MISSING_SHOWN, Missing
from grumem.errors import GrumemError, MissingLabelsError
from grumem.io.chunk_files import iter_sessions, read_chunk_file
from grumem.io.parquet import RowGroupWriter
from grumem.records.return_weights import ReturnWeights
from grumem.records.rollout_row import RolloutRow

SESSIONS = "sessions.parquet"

_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
_CHUNK = pa.struct([("text", pa.string()), ("chunk_sha", pa.string())])
_BUDGET = pa.struct(
    [(name, pa.int64()) for name in ("context", "question", "memory", "section", "response")]
)
_WEIGHTS = pa.struct([(name, pa.float64()) for name in ("r_update", "r_exit", "r_format")])

# the schema's properties in its order (tests hold the two together)
SESSIONS_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("agent_name", pa.string()),
        ("prompt", pa.list_(_MESSAGE)),
        ("ability", pa.string()),
        (
            "reward_model",
            pa.struct([("style", pa.string()), ("ground_truth", pa.list_(pa.string()))]),
        ),
        (
            "extra_info",
            pa.struct(
                [
                    ("index", pa.int64()),
                    ("split", pa.string()),
                    ("project", pa.string()),
                    ("query_id", pa.string()),
                    ("session", pa.string()),
                    ("question", pa.string()),
                    ("system", pa.string()),
                    ("level", pa.string()),
                    ("chunks", pa.list_(_CHUNK)),
                    ("t_last_evidence", pa.int64()),
                    ("budget", _BUDGET),
                    ("template_sha256", pa.string()),
                    ("alpha", pa.float64()),
                    ("return_weights", _WEIGHTS),
                    ("turn_weighting", pa.string()),
                ]
            ),
        ),
    ]
)
# texts are kilobytes each: their min/max in the footer would be large and filter nothing
_NO_STATISTICS = {
    "prompt.list.element.content",
    "extra_info.question",
    "extra_info.system",
    "extra_info.chunks.list.element.text",
    "extra_info.chunks.list.element.chunk_sha",
}


@dataclass(frozen=True)
class RowSettings:
    """What every row of a project's export shares (the run's config)."""

    level: str
    budget: Budget
    template_sha256: str
    system: str | None
    alpha: float
    return_weights: ReturnWeights
    data_source: str
    ability: str
    split: Split
    turn_weighting: str = ROW


class SessionChunks:
    """The sessions of a project's chunk files: their chunk shas, read once, and their
    rendered chunks, read back from their file when a row needs them (one file kept:
    a file holding several sessions is read once for those of them that follow)."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]):
        self.shas: dict[str, list[str]] = {}
        self._files: dict[str, str] = {}
        for session, chunks in iter_sessions(paths):
            self.shas[session] = [c.sha for c in chunks]
            self._files[session] = chunks[0].path
        self._cached: tuple[str, dict[str, list[Chunk]]] | None = None

    def chunks(self, session: str) -> list[tuple[str, str]]:
        """(rendered text, chunk_sha) of each chunk of `session`, in session order."""
        path = self._files[session]
        if self._cached is None or self._cached[0] != path:
            by_session: dict[str, list[Chunk]] = {}
            for c in read_chunk_file(path):
                by_session.setdefault(c.session, []).append(c)
            self._cached = (path, by_session)
        texts = [c.text for c in self._cached[1][session]]
        out = [(text, sha256_text(text)) for text in texts]  # rendered once
        if [sha for _, sha in out] != self.shas[session]:
            raise GrumemError(f"{path}: changed while the export read it; run the export again")
        return out


def check_session_labels(
    project: str,
    queries: Sequence[Mapping[str, str]],
    sessions: SessionChunks,
    labels: Labels,
    labels_path: str,
) -> None:
    """Every chunk of every session has a label for every query, or MissingLabelsError
    counting all that have none (before anything is written)."""
    missing = Missing()
    for session in sorted(sessions.shas):
        for q in queries:
            for t, sha in enumerate(sessions.shas[session], start=1):
                if labels.get(q["id"], sha) is None:
                    missing.add("chunk", f"{project}/{q['id']}/{session} t={t}", q["id"], sha)
    if missing:
        raise MissingLabelsError(
            labels_path,
            missing.chunks,
            missing.examples,
            MISSING_SHOWN,
            what=f"{missing.chunks} session chunk(s) of sessions.parquet",
        )


def rollout_rows(
    project: str,
    queries: Sequence[Mapping[str, str]],
    sessions: SessionChunks,
    labels: Labels,
    settings: RowSettings,
) -> Iterator[RolloutRow]:
    """The rows, sorted by (session, query_id), each checked as its record (rollout_row)."""
    index = 0
    for session in sorted(sessions.shas):
        chunks = sessions.chunks(session)
        split = settings.split.of(session)
        for q in sorted(queries, key=lambda q: q["id"]):
            row = rollout_row(
                index,
                project,
                q,
                session,
                chunks,
                labels.get,
                level=settings.level,
                budget=settings.budget,
                template_sha256=settings.template_sha256,
                system=settings.system,
                alpha=settings.alpha,
                return_weights=settings.return_weights,
                turn_weighting=settings.turn_weighting,
                data_source=settings.data_source,
                ability=settings.ability,
                split=split,
            )
            yield row
            index += 1


def write_rollout_rows(
    sink: str | IO[bytes],
    rows: Iterable[RolloutRow],
    split_sinks: Mapping[SplitName, tuple[str | IO[bytes], Mapping[bytes, bytes]]] | None = None,
) -> dict[SplitName, int]:
    """The rows as sessions.parquet (SESSIONS_SCHEMA), one row group at a time, and each
    row also into its split's sink of `split_sinks` (sink, the file's metadata); a split
    without rows gets a file of no rows, with the schema. How many rows each split got."""
    counts: dict[SplitName, int] = dict.fromkeys(SPLITS, 0)
    writers: dict[SplitName | None, RowGroupWriter[RolloutRow]] = {}
    try:
        writers[None] = _writer(sink)
        for name, (split_sink, metadata) in (split_sinks or {}).items():
            writers[name] = _writer(split_sink, metadata)
        for row in rows:
            split = row.extra_info.split
            counts[split] += 1
            writers[None].add(row)
            if split in writers:
                writers[split].add(row)
        for writer in writers.values():
            writer.flush()
    finally:
        for writer in writers.values():
            writer.close()
    return counts


def _writer(
    sink: str | IO[bytes], metadata: Mapping[bytes, bytes] | None = None
) -> RowGroupWriter[RolloutRow]:
    return RowGroupWriter(sink, SESSIONS_SCHEMA, _table, rollout_size, _NO_STATISTICS, metadata)


def _table(rows: list[RolloutRow]) -> pa.Table:
    return pa.Table.from_pylist([r.to_dict() for r in rows], schema=SESSIONS_SCHEMA)


def rollout_size(row: RolloutRow) -> int:
    """A row's text in characters: its question and its chunks."""
    info = row.extra_info
    return len(info.question) + sum(len(c.text) for c in info.chunks)
