"""Evidence labels (M5.1): one `{query_id, chunk_sha, evidence, annotator}` per pair.

Labels join to turns by `(query_id, chunk_sha)` and never by `t`: a session
that is re-chunked keeps its turn numbers but not its shas, and a join by `t`
would silently pair every turn with another chunk's label.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from grumem.errors import RecordError
from grumem.io.jsonl import read_jsonl_fast

LabelKey = tuple[str, str]  # (query_id, chunk_sha): what a label is joined by


@dataclass(frozen=True)
class Labels:
    """Evidence per (query_id, chunk_sha), read from one file."""

    path: str
    evidence: dict[LabelKey, bool]
    # each annotator named in the file -> its first line (κ checks independence)
    annotators: dict[str, int] = field(default_factory=dict)

    def get(self, query_id: str, chunk_sha: str) -> bool | None:
        """The label of the pair, or None when the file has none."""
        return self.evidence.get((query_id, chunk_sha))

    def __len__(self) -> int:
        return len(self.evidence)


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
    for line, _, rec in read_jsonl_fast(path, "label"):
        pair = (rec["query_id"], rec["chunk_sha"])
        if pair in evidence:
            kind = "conflicting" if evidence[pair] != rec["evidence"] else "duplicate"
            raise RecordError(
                path,
                line,
                "chunk_sha",
                f"{kind} label for query {pair[0]!r}, chunk {pair[1][:12]}…: line "
                f"{first_line[pair]} says evidence={_tf(evidence[pair])}, line {line} says "
                f"evidence={_tf(rec['evidence'])}; keep one line per (query_id, chunk_sha)",
            )
        evidence[pair] = rec["evidence"]
        first_line[pair] = line
        annotators.setdefault(rec["annotator"], line)
    return Labels(path, evidence, annotators)


def _tf(value: bool) -> str:
    return "true" if value else "false"
