"""Making the calibration file: a stratified sample for a person to label, and its check.

κ (grumem.core.kappa) compares the judge's labels with an independent labelling
of a sample of the same pairs. `draw_sample` picks that sample from the
judge's labels.jsonl, stratified by query and by the judge's label, with an
equal share per stratum: a sample drawn in proportion would hold almost no
`yes` pairs when evidence is rare, and κ over a handful of them says little
about whether the judge finds evidence. The judge's label is not written to
the sample and the lines are shuffled, so the person labels blind.

`finalize` turns the filled sample into a calibration file (the label
schema): every `evidence` must be true or false, or "skip" (the pair is left
out), the chunk text must still hash to its `chunk_sha`, and the annotator is
named.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grumem.config.settings import load_queries
from grumem.core.json_text import sha256_text
from grumem.errors import GrumemError, RecordError
from grumem.io.jsonl import read_jsonl, write_jsonl
from grumem.io.labels import load_labels
from grumem.stages.judge import distinct_chunks

Stratum = tuple[str, bool]  # (query_id, the judge's evidence)


@dataclass(frozen=True)
class SampleStats:
    strata: dict[Stratum, tuple[int, int]]  # stratum -> (drawn, available)
    skipped_queries: int  # labels of a query not in the queries file
    skipped_chunks: int  # labels of a chunk not in the chunk files

    @property
    def drawn(self) -> int:
        return sum(d for d, _ in self.strata.values())


def allocate(sizes: Mapping[Stratum, int], n: int) -> dict[Stratum, int]:
    """Equal shares of n over the strata, one at a time in stratum order, each capped
    at its size; a stratum's unused share goes to the others."""
    quota = dict.fromkeys(sizes, 0)
    order = sorted(sizes)
    left = min(n, sum(sizes.values()))
    while left:
        for s in order:
            if left and quota[s] < sizes[s]:
                quota[s] += 1
                left -= 1
    return quota


def draw_sample(
    queries_path: str | os.PathLike[str],
    labels_path: str | os.PathLike[str],
    chunk_paths: Sequence[str | os.PathLike[str]],
    n: int,
    seed: int,
) -> tuple[list[dict[str, Any]], SampleStats]:
    """Up to n calibration-sample lines, deterministic for (inputs, n, seed)."""
    if n < 1:
        raise GrumemError(f"--n {n}: draw at least one pair")
    questions = {q["id"]: q["question"] for q in load_queries(queries_path)}
    labels = load_labels(labels_path)
    where = {c.sha: (c.session, c.index) for c in distinct_chunks(chunk_paths)}
    strata: dict[Stratum, list[str]] = {}
    skipped_queries = skipped_chunks = 0
    for (query_id, sha), evidence in labels.evidence.items():
        if query_id not in questions:
            skipped_queries += 1
        elif sha not in where:
            skipped_chunks += 1
        else:
            strata.setdefault((query_id, evidence), []).append(sha)
    if not strata:
        raise GrumemError(
            f"{labels_path}: no label joins the queries and chunk files given"
            f" ({skipped_queries} of other queries, {skipped_chunks} of other chunks)"
        )
    rng = random.Random(seed)
    quota = allocate({s: len(shas) for s, shas in strata.items()}, n)
    picked: list[tuple[str, str]] = []
    for s in sorted(strata):
        # sorted first: the draw depends on the pairs, not on the labels file's order
        picked += [(s[0], sha) for sha in rng.sample(sorted(strata[s]), quota[s])]
    rng.shuffle(picked)  # the line order must not give the judge's label away
    texts = _chunk_texts(chunk_paths, {sha for _, sha in picked})
    lines = [
        {
            "query_id": query_id,
            "question": questions[query_id],
            "chunk_sha": sha,
            "session": where[sha][0],
            "index": where[sha][1],
            "chunk": texts[sha],
            "evidence": None,
        }
        for query_id, sha in picked
    ]
    stats = SampleStats(
        {s: (quota[s], len(strata[s])) for s in sorted(strata)}, skipped_queries, skipped_chunks
    )
    return lines, stats


def _chunk_texts(chunk_paths: Sequence[str | os.PathLike[str]], shas: set[str]) -> dict[str, str]:
    """Rendered text of the wanted chunks only (a second pass: the corpus is not held)."""
    return {c.sha: c.text for c in distinct_chunks(chunk_paths) if c.sha in shas}


def write_sample(
    queries_path: str | os.PathLike[str],
    labels_path: str | os.PathLike[str],
    chunk_paths: Sequence[str | os.PathLike[str]],
    n: int,
    seed: int,
    out: str | os.PathLike[str],
) -> SampleStats:
    lines, stats = draw_sample(queries_path, labels_path, chunk_paths, n, seed)
    write_jsonl(out, lines, "calibration-sample")
    return stats


def format_sample_stats(stats: SampleStats, n: int, out: str) -> str:
    parts = ", ".join(
        f"{q}/{'yes' if e else 'no'} {d} of {a}" for (q, e), (d, a) in stats.strata.items()
    )
    text = f"calibrate-sample: {stats.drawn} pairs ({parts}) -> {out}"
    if stats.drawn < n:
        text += f"; asked for {n}, every labelled pair is in the sample"
    if stats.skipped_queries or stats.skipped_chunks:
        text += (
            f"; not drawn: {stats.skipped_queries} label(s) of queries not in the queries file,"
            f" {stats.skipped_chunks} of chunks not in the chunk files"
        )
    return text + (
        ". Label it with grumem calibrate-serve (or set each `evidence` to true or false),"
        " then run grumem calibrate-finalize"
    )


SKIP = "skip"  # a sample line's `evidence` when the person could not decide


def finalize(
    sample_path: str | os.PathLike[str], annotator: str, out: str | os.PathLike[str]
) -> tuple[int, int]:
    """Write the calibration file from a filled sample; return how many pairs it holds
    and how many were skipped (left out)."""
    path = str(sample_path)
    if not annotator.strip():
        raise GrumemError("--annotator: name the person (or team) who labelled the sample")
    labels: dict[tuple[str, str], dict[str, Any]] = {}
    first_line: dict[tuple[str, str], int] = {}
    skipped = 0
    for line, rec in enumerate(read_jsonl(path, "calibration-sample"), start=1):
        if rec["evidence"] is None:
            raise RecordError(
                path,
                line,
                "evidence",
                'not filled: set it to true, false or "skip" (grumem calibrate-serve asks'
                " for the pairs left)",
            )
        actual = sha256_text(rec["chunk"])
        if actual != rec["chunk_sha"]:
            raise RecordError(
                path,
                line,
                "chunk",
                f"the chunk text was edited (its sha256 is {actual[:12]}…, chunk_sha says "
                f"{rec['chunk_sha'][:12]}…): restore it; only `evidence` is to be filled",
            )
        pair = (rec["query_id"], rec["chunk_sha"])
        if pair in labels:
            raise RecordError(
                path,
                line,
                "chunk_sha",
                f"query {pair[0]!r}, chunk {pair[1][:12]}… is also on line {first_line[pair]}",
            )
        first_line[pair] = line
        if rec["evidence"] == SKIP:
            skipped += 1
            continue
        labels[pair] = {
            "query_id": rec["query_id"],
            "chunk_sha": rec["chunk_sha"],
            "evidence": rec["evidence"],
            "annotator": annotator,
        }
    if not labels:
        why = f"all {skipped} pairs skipped" if skipped else "empty sample"
        raise RecordError(path, None, None, f"{why}: nothing to calibrate with")
    return write_jsonl(out, (labels[p] for p in sorted(labels)), "label"), skipped


def main_sample(args: argparse.Namespace) -> int:
    """`grumem calibrate-sample`: a stratified sample of pairs to label by hand."""
    stats = write_sample(args.queries, args.labels, args.chunks, args.n, args.seed, args.out)
    print(format_sample_stats(stats, args.n, args.out), file=sys.stderr)
    return 0


def main_finalize(args: argparse.Namespace) -> int:
    """`grumem calibrate-finalize`: a filled sample -> the calibration file."""
    n, skipped = finalize(args.sample, args.annotator, args.out)
    print(
        f"calibrate-finalize: {n} labelled pairs ({skipped} skipped) -> {args.out}",
        file=sys.stderr,
    )
    return 0
