"""Evidence labels: one decision per `(query_id, chunk_sha)`, as a label file holds
them (grumem.io.labels reads one).

Labels join to turns by `(query_id, chunk_sha)` and never by `t`: a session
that is re-chunked keeps its turn numbers but not its shas, and a join by `t`
would silently pair every turn with another chunk's label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
