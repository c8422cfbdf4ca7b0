"""The calibration sample: which pairs a person labels, and the calibration file their
answers make.

κ (grumem.core.kappa) compares the judge's labels with an independent labelling
of a sample of the same pairs. `draw_pairs` picks that sample from the judge's
labels, stratified by query and by the judge's label, with an equal share per
stratum: a sample drawn in proportion would hold almost no `yes` pairs when
evidence is rare, and κ over a handful of them says little about whether the
judge finds evidence. The judge's label is not written to the sample and the
lines are shuffled, so the person labels blind.

`calibration_labels` turns the filled sample's lines into the calibration file's
(the label schema): every `evidence` must be true or false, or "skip" (the pair
is left out), the chunk text must still hash to its `chunk_sha`, and the
annotator is named. Files are read and written by grumem.tools.calibrate.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from grumem.core.evidence import LabelKey, Labels
from grumem.core.json_text import sha256_text
from grumem.errors import GrumemError, RecordError

Stratum = tuple[str, bool]  # (query_id, the judge's evidence)
SKIP = "skip"  # a sample line's `evidence` when the person could not decide


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


def draw_pairs(
    questions: Mapping[str, str],
    labels: Labels,
    chunks: Mapping[str, Any],
    n: int,
    seed: int,
) -> tuple[list[LabelKey], SampleStats]:
    """Up to n (query_id, chunk_sha) of `labels`, in the order to write them; deterministic
    for (questions, labels, chunks, n, seed). Only pairs of a query in `questions` (id ->
    question) and of a chunk in `chunks` (sha -> anything) are drawn."""
    strata: dict[Stratum, list[str]] = {}
    skipped_queries = skipped_chunks = 0
    for (query_id, sha), evidence in labels.evidence.items():
        if query_id not in questions:
            skipped_queries += 1
        elif sha not in chunks:
            skipped_chunks += 1
        else:
            strata.setdefault((query_id, evidence), []).append(sha)
    if not strata:
        raise GrumemError(
            f"{labels.path}: no label joins the queries and chunk files given"
            f" ({skipped_queries} of other queries, {skipped_chunks} of other chunks)"
        )
    rng = random.Random(seed)
    quota = allocate({s: len(shas) for s, shas in strata.items()}, n)
    picked: list[LabelKey] = []
    for s in sorted(strata):
        # sorted first: the draw depends on the pairs, not on the labels file's order
        picked += [(s[0], sha) for sha in rng.sample(sorted(strata[s]), quota[s])]
    rng.shuffle(picked)  # the line order must not give the judge's label away
    stats = SampleStats(
        {s: (quota[s], len(strata[s])) for s in sorted(strata)}, skipped_queries, skipped_chunks
    )
    return picked, stats


def sample_lines(
    picked: Iterable[LabelKey],
    questions: Mapping[str, str],
    where: Mapping[str, tuple[str, int]],
    texts: Mapping[str, str],
) -> list[dict[str, Any]]:
    """The calibration-sample lines of the drawn pairs: `where` (sha -> session, index)
    and `texts` (sha -> rendered chunk) of their chunks, `evidence` left to fill."""
    return [
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


def calibration_labels(
    path: str, lines: Iterable[tuple[int, dict[str, Any]]], annotator: str
) -> tuple[list[dict[str, Any]], int]:
    """The label records of a filled sample's (line number, line)s, in pair order, and
    how many were skipped (left out); a RecordError naming `path`, line and field for a
    line that cannot be one."""
    if not annotator.strip():
        raise GrumemError("--annotator: name the person (or team) who labelled the sample")
    labels: dict[LabelKey, dict[str, Any]] = {}
    first_line: dict[LabelKey, int] = {}
    skipped = 0
    for line, rec in lines:
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
    return [labels[p] for p in sorted(labels)], skipped
