"""sessions.parquet rows of the bundled demo (fixtures/demo), as the export will write
them: each chunk rendered as the prompts stage fills `{chunk}` (Chunk.text), its
label joined from fixtures/demo/labels.jsonl by (query_id, chunk_sha)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grumem.config.settings import load_queries
from grumem.core.advantages import ALPHA, ReturnWeights
from grumem.core.json_text import sha256_text
from grumem.core.template import Budget
from grumem.io.chunk_files import iter_sessions
from grumem.io.labels import load_labels
from grumem.io.template_files import DEFAULT_TEMPLATE, load_template
from grumem.verl.session_row import WEIGHTS, session_row

BUDGET = Budget()  # the config's defaults
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


def demo_session_rows(
    level: str = "L1",
    budget: Budget = BUDGET,
    system: str | None = None,
    alpha: float = ALPHA,
    return_weights: ReturnWeights = WEIGHTS,
) -> list[dict[str, Any]]:
    """One row per (query, session) of the demo, queries first, sessions in file order."""
    labels = load_labels(DEMO / "labels.jsonl")
    sessions = list(iter_sessions([DEMO / "chunks"]))
    template_sha = sha256_text(load_template(DEFAULT_TEMPLATE))
    rows = []
    for query in load_queries(DEMO / "queries.yaml"):
        for session, chunks in sessions:
            rows.append(
                session_row(
                    len(rows),
                    "demo",
                    query,
                    session,
                    [(c.text, c.sha) for c in chunks],
                    labels.get,
                    level=level,
                    budget=budget,
                    template_sha256=template_sha,
                    system=system,
                    alpha=alpha,
                    return_weights=return_weights,
                )
            )
    return rows


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """The rows as a parquet file verl's RLHFDataset reads."""
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
