"""Evidence labels and what leads to them: the label (workflow/schemas/label.schema.yaml),
the pair the judge could not label (unjudged.schema.yaml) and the calibration sample a
person labels (calibration-sample.schema.yaml)."""

from __future__ import annotations

from typing import Literal

from grumem.records.base import Count, NonEmpty, Record, Sha256

__all__ = ["CalibrationSample", "JudgeParseFailure", "Label", "UnjudgedPair"]


class Label(Record, frozen=True):
    """Whether a chunk is evidence for a query, and who said so."""

    query_id: NonEmpty
    chunk_sha: Sha256
    evidence: bool
    annotator: NonEmpty


class JudgeParseFailure(Record, frozen=True):
    """Why the judge's answer did not parse: the tag, the reason, the answer (truncated)."""

    tag: Literal["think", "evidence", "response"]
    reason: str
    raw: str


class UnjudgedPair(Record, frozen=True):
    """A pair the judge could not label: never guessed, the export waits for its label."""

    query_id: NonEmpty
    chunk_sha: Sha256
    reason: Literal["unparsed", "request_failed", "budget"]
    request_sha256: Sha256 | None
    parse_error: JudgeParseFailure | None
    detail: str | None

    def __post_init__(self) -> None:
        # the schema's if/then, by reason: what each kind of failure records
        if self.reason == "unparsed":
            ok = self.parse_error is not None and self.request_sha256 is not None
            need = "a parse_error and a request_sha256"
        elif self.reason == "request_failed":
            ok = self.request_sha256 is not None and self.detail is not None
            need = "a request_sha256 and a detail"
        else:
            ok = self.request_sha256 is None and self.detail is not None
            need = "a detail and no request_sha256"
        if not ok:
            raise ValueError(f"reason {self.reason!r} needs {need}")


class CalibrationSample(Record, frozen=True):
    """One (query, chunk) pair for a person to label blind: evidence true, false, null
    (not labelled yet) or "skip" (undecidable, left out of the calibration file)."""

    query_id: NonEmpty
    question: NonEmpty
    chunk_sha: Sha256
    session: str
    index: Count
    chunk: str
    evidence: bool | None | Literal["skip"]
