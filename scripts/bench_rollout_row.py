"""What a sessions.parquet row costs per training row: prints figures, asserts nothing.

verl copies a dataset row's columns into the training row of every turn of every
rollout (the grumem agent loop returns one output per turn), so a row's size is
paid once per turn. Measured here, for the demo's rows and for a long session
(200 chunks at the section budget, 5,000 cl100k tokens each):

- the row in sessions.parquet (the export's writer, zstd): the bytes on disk;
- a training row's `extra_info` pickled (what verl's workers and TransferQueue
  move), with the chunk texts (stock verl's copy) and without them (what
  grumem.verl.worker keeps: `without_chunk_texts`);
- per rollout of the session, its turns' training rows, both ways;
- the other design, a referenced chunk file: the row with shas only plus the
  chunk file every rollout worker would read.

    .venv/bin/python scripts/bench_rollout_row.py [--chunks 200] [--tokens 5000]

The long session's texts are the demo's words in a seeded random order (about
as compressible as prose), one chunk cut at --tokens tokens, each made distinct.
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import random
import sys
from pathlib import Path
from typing import Any

from grumem.config.settings import load_queries
from grumem.core.advantages import ALPHA
from grumem.core.json_text import sha256_text
from grumem.core.rollout_row import ABILITY, rollout_row
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
from grumem.io.tokenizer import cl100k_tokens
from grumem.records.return_weights import EQUAL_WEIGHTS
from grumem.records.rollout_row import RolloutRow
from grumem.verl.rollout import without_chunk_texts

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo"


def demo_rows() -> list[dict[str, Any]]:
    settings = RowSettings(
        level="L1",
        budget=Budget(),
        template_sha256=sha256_text(load_template(GRU_MEM_TEMPLATE)),
        system=None,
        alpha=ALPHA,
        return_weights=EQUAL_WEIGHTS,
        data_source="grumem",
        ability=ABILITY,
        split=Split(),
    )
    queries = load_queries(DEMO / "queries.yaml")
    labels = load_labels(DEMO / "labels.jsonl")
    rows = rollout_rows("demo", queries, SessionChunks([DEMO / "chunks"]), labels, settings)
    return [row.to_dict() for row in rows]  # the JSON values verl's dataset holds


def long_row(template_row: dict[str, Any], chunks: int, tokens: int) -> dict[str, Any]:
    """A session of `chunks` distinct chunks of `tokens` cl100k tokens each."""
    counter = cl100k_tokens()
    words = " ".join(c["text"] for c in template_row["extra_info"]["chunks"]).split()
    rng = random.Random(0)
    texts = []
    for i in range(chunks):
        text = f"[User] chunk {i}:"
        while counter.count(text) < tokens:
            text += " " + " ".join(rng.choice(words) for _ in range(400))
        ids = counter.encoder.encode_ordinary(text)[:tokens]
        texts.append(counter.encoder.decode_bytes(ids).decode("utf-8", errors="ignore"))
    info = template_row["extra_info"]
    query = {"id": info["query_id"], "question": info["question"]}
    return rollout_row(
        0,
        info["project"],
        query,
        f"long-{chunks}",
        [(t, sha256_text(t)) for t in texts],
        lambda q, sha: sha == sha256_text(texts[-1]),
        level=info["level"],
        budget=Budget(),
        template_sha256=info["template_sha256"],
        split="train",
    ).to_dict()


def parquet_bytes(rows: list[dict[str, Any]]) -> int:
    buffer = io.BytesIO()
    write_rollout_rows(buffer, [RolloutRow.convert(row) for row in rows])
    return buffer.tell()


def pickled(row: dict[str, Any]) -> int:
    return len(pickle.dumps(row["extra_info"]))


def chunk_file_bytes(row: dict[str, Any]) -> int:
    """A chunk file of the session (one JSON line a chunk, as grumem chunk writes)."""
    info = row["extra_info"]
    lines = (
        json.dumps({"session": info["session"], "index": i, "records": [{"text": c["text"]}]})
        for i, c in enumerate(info["chunks"])
    )
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def figures(name: str, row: dict[str, Any], rows_in_file: list[dict[str, Any]]) -> dict:
    turns = len(row["extra_info"]["chunks"])
    with_texts, without = pickled(row), pickled(without_chunk_texts(row))
    return {
        "row": name,
        "chunks": turns,
        "text_bytes": sum(len(c["text"].encode("utf-8")) for c in row["extra_info"]["chunks"]),
        "parquet_bytes": parquet_bytes(rows_in_file),
        "training_row_with_texts": with_texts,
        "training_row_without_texts": without,
        "rollout_with_texts": with_texts * turns,
        "rollout_without_texts": without * turns,
        "referenced_file_row": without,
        "referenced_chunk_file": chunk_file_bytes(row),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--chunks", type=int, default=200)
    p.add_argument("--tokens", type=int, default=Budget().section)
    args = p.parse_args(argv)
    rows = demo_rows()
    demo = next(r for r in rows if r["extra_info"]["session"] == "demo-03-npm-peer-deps")
    largest = max(rows, key=lambda r: len(r["extra_info"]["chunks"]))
    long = long_row(largest, args.chunks, args.tokens)
    out = [
        figures("demo, 3 chunks (demo-03)", demo, [demo]),
        figures(
            f"demo, largest ({len(largest['extra_info']['chunks'])} chunks)", largest, [largest]
        ),
        figures(f"long session ({args.chunks} x {args.tokens} tokens)", long, [long]),
    ]
    all_demo = parquet_bytes(rows)
    for f in out:
        print(f"{f['row']}:")
        for k, v in f.items():
            if k != "row":
                print(f"  {k:28} {v:>12,}")
    print(f"demo sessions.parquet (all {len(rows)} rows): {all_demo:,} bytes")
    print("perf " + " ".join(f"{k}={v}" for k, v in out[-1].items() if k != "row"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
