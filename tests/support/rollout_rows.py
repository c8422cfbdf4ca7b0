"""sessions.parquet rows of the bundled demo (fixtures/demo), made by the export's own
code (grumem.corpus.rollout_rows) with the settings the demo's config gives: each chunk
rendered as the prompts stage fills `{chunk}`, its label joined from
fixtures/demo/labels.jsonl by (query_id, chunk_sha)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from grumem.config.settings import load_config, load_queries
from grumem.core.advantages import ALPHA
from grumem.core.json_text import sha256_text
from grumem.core.rollout_row import ABILITY
from grumem.core.split import Split
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
from grumem.records.rollout_row import RolloutRow

BUDGET = Budget()  # the config's defaults
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "fixtures" / "demo"


def demo_split() -> Split:
    """The demo's split, as config.yaml sets it."""
    return Split.from_config(load_config(REPO / "config.yaml")["projects"]["demo"]["split"])


def demo_rollout_rows(
    level: str = "L1",
    budget: Budget = BUDGET,
    system: str | None = None,
    alpha: float = ALPHA,
    return_weights: ReturnWeights = EQUAL_WEIGHTS,
) -> list[dict[str, Any]]:
    """One row per (query, session) of the demo, in the export's order, as the JSON
    values verl's dataset hands the agent loop (a row record's `to_dict`)."""
    settings = RowSettings(
        level=level,
        budget=budget,
        template_sha256=sha256_text(load_template(GRU_MEM_TEMPLATE)),
        system=system,
        alpha=alpha,
        return_weights=return_weights,
        data_source="grumem",
        ability=ABILITY,
        split=demo_split(),
    )
    queries = load_queries(DEMO / "queries.yaml")
    labels = load_labels(DEMO / "labels.jsonl")
    rows = rollout_rows("demo", queries, SessionChunks([DEMO / "chunks"]), labels, settings)
    return [row.to_dict() for row in rows]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """The rows as a parquet file verl's RLHFDataset reads, as the export writes it."""
    with open(path, "wb") as f:
        write_rollout_rows(f, [RolloutRow.convert(row) for row in rows])
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


SPLIT_FILES = {s: f"sessions-{s}.parquet" for s in ("train", "val", "test")}


def write_split_files(corpus: Path, rows: list[dict[str, Any]]) -> dict[str, Path]:
    """The export's sessions files: sessions.parquet (every row) and one file a split
    beside it, by each row's own extra_info.split, its index its place in its file."""
    corpus.mkdir(parents=True, exist_ok=True)
    out = {"all": write_rows(corpus / "sessions.parquet", rows)}
    for split, name in SPLIT_FILES.items():
        mine = [r for r in rows if r["extra_info"]["split"] == split]
        mine = [{**r, "extra_info": {**r["extra_info"], "index": i}} for i, r in enumerate(mine)]
        out[split] = write_rows(corpus / name, mine)
    return out
