"""A label file read: one `{query_id, chunk_sha, evidence, annotator}` a line,
into grumem.core.evidence.Labels."""

from __future__ import annotations

import os

from grumem.core.evidence import LabelKey, Labels
from grumem.errors import RecordError
from grumem.io.typed import read_records
from grumem.records.label import Label


def load_labels(path: str | os.PathLike[str]) -> Labels:
    """Read a label file, validated by workflow/schemas/label.schema.yaml.

    A pair labelled twice is an error naming both lines, whether the two
    agree or not: one file holds one annotator's single decision per pair,
    and a repeat means two files were concatenated or a pair was relabelled
    without removing the old line.
    """
    path = str(path)
    evidence: dict[LabelKey, bool] = {}
    first_line: dict[LabelKey, int] = {}
    annotators: dict[str, int] = {}
    for line, rec in read_records(path, Label):
        pair = (rec.query_id, rec.chunk_sha)
        if pair in evidence:
            kind = "conflicting" if evidence[pair] != rec.evidence else "duplicate"
            raise RecordError(
                path,
                line,
                "chunk_sha",
                f"{kind} label for query {pair[0]!r}, chunk {pair[1][:12]}…: line "
                f"{first_line[pair]} says evidence={_tf(evidence[pair])}, line {line} says "
                f"evidence={_tf(rec.evidence)}; keep one line per (query_id, chunk_sha)",
            )
        evidence[pair] = rec.evidence
        first_line[pair] = line
        annotators.setdefault(rec.annotator, line)
    return Labels(path, evidence, annotators)


def _tf(value: bool) -> str:
    return "true" if value else "false"
