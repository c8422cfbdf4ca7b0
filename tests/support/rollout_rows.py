"""sessions.parquet rows of the bundled demo (fixtures/demo), made by the export's own
code (grumem.corpus.rollout_rows) with the settings the demo's config gives: each chunk
rendered as the prompts stage fills `{chunk}`, its label joined from
fixtures/demo/labels.jsonl by (query_id, chunk_sha)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from grumem.config.settings import load_queries
from grumem.core.advantages import ALPHA
from grumem.core.json_text import sha256_text
from grumem.core.rollout_row import ABILITY
from grumem.core.template import Budget
from grumem.corpus.rollout_rows import (
    RowSettings,
    SessionChunks,
    rollout_rows,
    write_rollout_rows,
)
from grumem.io.labels import load_labels
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_template
from grumem.records.return_weights import EQUAL_WEIGHTS, ReturnWeights

BUDGET = Budget()  # the config's defaults
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


def demo_rollout_rows(
    level: str = "L1",
    budget: Budget = BUDGET,
    system: str | None = None,
    alpha: float = ALPHA,
    return_weights: ReturnWeights = EQUAL_WEIGHTS,
) -> list[dict[str, Any]]:
    """One row per (query, session) of the demo, in the export's order."""
    settings = RowSettings(
        level=level,
        budget=budget,
        template_sha256=sha256_text(load_template(GRU_MEM_TEMPLATE)),
        system=system,
        alpha=alpha,
        return_weights=return_weights,
        data_source="grumem",
        ability=ABILITY,
    )
    queries = load_queries(DEMO / "queries.yaml")
    labels = load_labels(DEMO / "labels.jsonl")
    return list(rollout_rows("demo", queries, SessionChunks([DEMO / "chunks"]), labels, settings))


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """The rows as a parquet file verl's RLHFDataset reads, as the export writes it."""
    with open(path, "wb") as f:
        write_rollout_rows(f, rows)
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


SPLIT_FILES = {s: f"sessions-{s}.parquet" for s in ("train", "val", "test")}


def split_rows(
    rows: list[dict[str, Any]], val_sessions: int = 2
) -> dict[str, list[dict[str, Any]]]:
    """The rows by split, the last `val_sessions` sessions (sorted) held out as val, each
    row's extra_info.split saying which and its index its place in its split."""
    sessions = sorted({r["extra_info"]["session"] for r in rows})
    held_out = set(sessions[len(sessions) - val_sessions :])
    out: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
    for r in rows:
        split = "val" if r["extra_info"]["session"] in held_out else "train"
        info = {**r["extra_info"], "split": split, "index": len(out[split])}
        out[split].append({**r, "extra_info": info})
    return out


def write_split_files(
    corpus: Path, rows: list[dict[str, Any]], val_sessions: int = 2
) -> dict[str, Path]:
    """The export's sessions files with a split: sessions.parquet (every row) and
    sessions-train.parquet and sessions-val.parquet beside it (split_rows)."""
    by_split = split_rows(rows, val_sessions)
    corpus.mkdir(parents=True, exist_ok=True)
    every = [
        {**r, "extra_info": {**r["extra_info"], "index": i}}
        for i, r in enumerate(by_split["train"] + by_split["val"])
    ]
    out = {"all": write_rows(corpus / "sessions.parquet", every)}
    for split, mine in by_split.items():
        out[split] = write_rows(corpus / SPLIT_FILES[split], mine)
    return out


def derive_split_files(corpus: Path) -> None:
    """sessions-train.parquet and sessions-val.parquet beside an exported sessions.parquet
    that has none (split_rows over its rows); an export that writes them is left as it is."""
    if (corpus / SPLIT_FILES["train"]).exists():
        return
    for split, mine in split_rows(read_rows(corpus / "sessions.parquet")).items():
        write_rows(corpus / SPLIT_FILES[split], mine)
