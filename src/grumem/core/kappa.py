"""κ calibration: Cohen's κ between the labels and an independent second labelling.

The export refuses to run without a kappa.json whose κ clears
`export.min_kappa` and whose `labels_sha256` is the current labels file:
rewards are only as good as the labels they compare the gates against.

κ is computed from the 2x2 confusion table in integer arithmetic,
κ = (n·agree − E) / (n² − E) with E = Σ_c rowₖ·colₖ, so the degenerate case
(expected agreement exactly 1: both labellings constant and equal) is
detected exactly rather than through a float compared with 1.0.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from grumem.core.evidence import Labels
from grumem.errors import KappaError, RecordError
from grumem.records.label import Label


@dataclass(frozen=True)
class Confusion:
    """Counts of (labels, calibration) decisions over the overlapping pairs."""

    yes_yes: int = 0
    yes_no: int = 0
    no_yes: int = 0
    no_no: int = 0

    @classmethod
    def count(cls, decisions: Iterable[tuple[bool, bool]]) -> Confusion:
        cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
        for a, b in decisions:
            cells[(bool(a), bool(b))] += 1
        return cls(cells[True, True], cells[True, False], cells[False, True], cells[False, False])

    @property
    def n(self) -> int:
        return self.yes_yes + self.yes_no + self.no_yes + self.no_no

    def as_dict(self) -> dict[str, int]:
        return {
            "yes_yes": self.yes_yes,
            "yes_no": self.yes_no,
            "no_yes": self.no_yes,
            "no_no": self.no_no,
        }


@dataclass(frozen=True)
class Kappa:
    kappa: float
    n: int
    observed_agreement: float
    expected_agreement: float
    confusion: Confusion


def cohen_kappa(confusion: Confusion, min_n: int = 1) -> Kappa:
    """Cohen's κ of a 2x2 table; KappaError when n < min_n or chance agreement is 1."""
    n = confusion.n
    if n < max(min_n, 1):
        raise KappaError(
            f"only {n} pair(s) are labelled in both files; κ needs at least {min_n}"
            " (export.min_calibration): calibrate more pairs"
        )
    agree = confusion.yes_yes + confusion.no_no
    labels_yes = confusion.yes_yes + confusion.yes_no
    calib_yes = confusion.yes_yes + confusion.no_yes
    expected = labels_yes * calib_yes + (n - labels_yes) * (n - calib_yes)  # = pe · n²
    if expected == n * n:
        only = "evidence" if labels_yes == n else "no evidence"
        raise KappaError(
            f"expected agreement is 1: all {n} overlapping pairs are '{only}' in both"
            " files, so agreement cannot be told from chance; calibrate a sample"
            " that holds both evidence and non-evidence chunks"
        )
    return Kappa(
        kappa=(n * agree - expected) / (n * n - expected),
        n=n,
        observed_agreement=agree / n,
        expected_agreement=expected / (n * n),
        confusion=confusion,
    )


def kappa_between(labels: Labels, calibration: Labels, min_calibration: int) -> Kappa:
    """κ over the pairs both files label (in the labels file's order, for a stable count)."""
    decisions = (
        (value, calibration.evidence[pair])
        for pair, value in labels.evidence.items()
        if pair in calibration.evidence
    )
    return cohen_kappa(Confusion.count(decisions), min_calibration)


def check_independent(labels: Labels, calibration: Labels) -> None:
    """The calibration must be another annotator's: κ of a labelling with itself is 1.

    For judge labels the annotator is the judge's model, so this also refuses a
    calibration the judge (or a copy of its labels) made; a person labels it."""
    for name, line in calibration.annotators.items():
        if name in labels.annotators:
            raise RecordError(
                calibration.path,
                line,
                "annotator",
                f"{name!r} also made the labels ({labels.path}:{labels.annotators[name]}):"
                " the calibration must be an independent labelling by someone else (for"
                " judge labels, a person, not the judge); draw a sample with grumem"
                " calibrate-sample and label it with calibrate-finalize --annotator NAME",
            )


def check_in_project(
    path: str,
    rows: Iterable[tuple[int, Label]],
    query_ids: Collection[str],
    chunk_shas: Collection[str],
) -> None:
    """Every calibration pair is (a query of the project, a chunk of its sessions).

    κ over pairs the project never runs measures nothing about its labels: 30
    invented pairs copied into both files would give κ 1 and let the export run."""
    for line, rec in rows:
        if rec.query_id not in query_ids:
            raise RecordError(
                path,
                line,
                "query_id",
                f"query {rec.query_id!r} is not one of the project's queries"
                f" ({', '.join(sorted(query_ids))}): calibrate the project's own pairs",
            )
        if rec.chunk_sha not in chunk_shas:
            raise RecordError(
                path,
                line,
                "chunk_sha",
                f"chunk {rec.chunk_sha[:12]}… is not a chunk of the project's sessions"
                f" ({len(chunk_shas)} distinct chunks): calibrate the project's own chunks"
                " (grumem calibrate-sample draws them)",
            )
