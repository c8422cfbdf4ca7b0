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
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from grumem.core.advantages import ROW
from grumem.core.chunk_text import Chunk
from grumem.core.evidence import Labels
from grumem.core.json_text import sha256_text
from grumem.core.rollout_row import rollout_row
from grumem.core.template import Budget
from grumem.corpus.trajectory import MISSING_SHOWN, Missing
from grumem.corpus.turn_rows import ROW_GROUP_BYTES, ROW_GROUP_ROWS, statistics_columns
from grumem.errors import GrumemError, MissingLabelsError
from grumem.io.chunk_files import iter_sessions, read_chunk_file
from grumem.records.return_weights import ReturnWeights

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
) -> Iterator[dict[str, Any]]:
    """The rows, sorted by (session, query_id), each checked as its record (rollout_row)."""
    index = 0
    for session in sorted(sessions.shas):
        chunks = sessions.chunks(session)
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
            )
            yield row
            index += 1


def write_rollout_rows(sink: str | IO[bytes], rows: Iterable[dict[str, Any]]) -> int:
    """The rows as sessions.parquet (SESSIONS_SCHEMA), one row group at a time; how many."""
    writer = pq.ParquetWriter(
        sink,
        SESSIONS_SCHEMA,
        compression="zstd",
        write_statistics=statistics_columns(SESSIONS_SCHEMA, _NO_STATISTICS),
    )
    n = 0
    try:
        group: list[dict[str, Any]] = []
        size = 0
        for row in rows:
            group.append(row)
            size += row_size(row)
            n += 1
            if len(group) >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_pylist(group, schema=SESSIONS_SCHEMA))
                group, size = [], 0
        if group:
            writer.write_table(pa.Table.from_pylist(group, schema=SESSIONS_SCHEMA))
    finally:
        writer.close()
    return n


def row_size(row: Mapping[str, Any]) -> int:
    info = row["extra_info"]
    return len(info["question"]) + sum(len(c["text"]) for c in info["chunks"])
