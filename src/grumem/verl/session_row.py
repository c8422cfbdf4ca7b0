"""A sessions.parquet row (workflow/schemas/rollout-row.schema.yaml), read back by the
agent loop.

The export writes one row per (project, query, session) (grumem.core.rollout_row
builds it); verl's RLHFDataset hands its columns to the `grumem` agent loop as
keyword arguments, where `read_session_row` checks them as the schema's typed
record (grumem.records.rollout_row) and returns a SessionRow. verl and
pandas may hand nested values over as numpy arrays and scalars: those are read
as the Python values they hold; anything the schema does not allow is refused
with the field named, never coerced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from grumem.core.json_text import sha256_text
from grumem.core.rewards import last_evidence_turn
from grumem.core.rollout_row import AGENT_NAME, EVIDENCE
from grumem.core.template import Budget
from grumem.errors import RolloutRowError
from grumem.records.return_weights import ReturnWeights
from grumem.records.rollout_row import RolloutRow

__all__ = ["SCHEMA", "SessionChunk", "SessionRow", "plain", "read_session_row"]
__all__ += ["without_chunk_texts"]

SCHEMA = "rollout-row"


@dataclass(frozen=True)
class SessionChunk:
    t: int
    text: str
    chunk_sha: str
    evidence: bool


@dataclass(frozen=True)
class SessionRow:
    """What one online rollout of the loop needs of its row."""

    project: str
    query_id: str
    session: str
    question: str
    system: str | None
    level: str
    chunks: tuple[SessionChunk, ...]
    t_last_evidence: int | None
    budget: Budget
    template_sha256: str
    alpha: float
    return_weights: ReturnWeights
    index: int

    @property
    def where(self) -> str:
        """The row, as an error message names it."""
        return f"sessions row {self.index} ({self.project}/{self.query_id}/{self.session})"


def read_session_row(columns: Mapping[str, Any]) -> SessionRow:
    """The row the agent loop was given (verl passes the dataset's columns as keyword
    arguments, with its own beside them), checked: schema, chunk shas, labels."""
    row = {k: plain(columns.get(k)) for k in ("data_source", "prompt", "ability")}
    # verl consumes agent_name to pick the loop: a row that reached this loop named it
    row["agent_name"] = plain(columns.get("agent_name", AGENT_NAME))
    row["reward_model"] = plain(columns.get("reward_model"))
    row["extra_info"] = plain(columns.get("extra_info"))
    where = _where(row["extra_info"])
    try:
        record = RolloutRow.convert(row, where)  # the schema's record, checked in C
    except RolloutRowError as e:
        raise RolloutRowError(
            f"{e}: not a grumem sessions row; export sessions.parquet with this grumem"
        ) from None
    info = record.extra_info
    labels = record.reward_model.ground_truth
    if len(labels) != len(info.chunks):
        raise RolloutRowError(
            f"{where}: reward_model.ground_truth has {len(labels)} labels for"
            f" {len(info.chunks)} chunks: one label per chunk"
        )
    chunks = []
    for t, (c, label) in enumerate(zip(info.chunks, labels, strict=True), start=1):
        if sha256_text(c.text) != c.chunk_sha:
            raise RolloutRowError(
                f"{where}: extra_info.chunks.{t - 1}.chunk_sha is not the sha256 of its text:"
                " the row was altered after export"
            )
        chunks.append(SessionChunk(t, c.text, c.chunk_sha, EVIDENCE[label]))
    last = last_evidence_turn((c.t, c.evidence) for c in chunks)
    if info.t_last_evidence != last:
        raise RolloutRowError(
            f"{where}: extra_info.t_last_evidence is {info.t_last_evidence}, the labels say {last}"
        )
    b, w = info.budget, info.return_weights
    return SessionRow(
        project=info.project,
        query_id=info.query_id,
        session=info.session,
        question=info.question,
        system=info.system,
        level=info.level,
        chunks=tuple(chunks),
        t_last_evidence=last,
        budget=Budget(b.context, b.question, b.memory, b.section, b.response),
        template_sha256=info.template_sha256,
        alpha=float(info.alpha),
        return_weights=ReturnWeights(w.r_update, w.r_exit, w.r_format),
        index=info.index,
    )


def without_chunk_texts(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The row's columns as each turn's training row keeps them: chunk shas, no texts."""
    info = plain(columns["extra_info"])
    info["chunks"] = [{"chunk_sha": c["chunk_sha"]} for c in info["chunks"]]
    return {**columns, "extra_info": info}


def plain(value: Any) -> Any:
    """`value` as JSON-shaped Python: mappings, lists, str, int, float, bool, None.

    numpy arrays and scalars (what verl's batches and pandas hold) become the
    lists and numbers they are (`tolist`); anything else is returned as it is,
    for the schema to refuse."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, str | bytes):
        return plain(tolist())
    return value


def _where(info: Any) -> str:
    if isinstance(info, Mapping) and isinstance(info.get("index"), int):
        return f"sessions row {info['index']}"
    return "sessions row"
