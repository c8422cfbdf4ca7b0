"""κ calibration (M5.2): Cohen's κ between the labels and an independent second labelling.

The export refuses to run without a kappa.json whose κ clears
`export.min_kappa` and whose `labels_sha256` is the current labels file:
rewards are only as good as the labels they compare the gates against.

κ is computed from the 2x2 confusion table in integer arithmetic,
κ = (n·agree − E) / (n² − E) with E = Σ_c rowₖ·colₖ, so the degenerate case
(expected agreement exactly 1: both labellings constant and equal) is
detected exactly rather than through a float compared with 1.0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from grumem.errors import GrumemError
from grumem.labels import Labels, load_labels
from grumem.records import RecordError, sha256_file, validate, write_json


class KappaError(GrumemError):
    """κ cannot be computed meaningfully from these inputs."""


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


def kappa_record(
    result: Kappa, labels_path: str, calibration_path: str, min_calibration: int
) -> dict[str, Any]:
    """kappa.json's content: no timestamps, paths as given, so reruns are byte-identical."""
    return {
        "kappa": result.kappa,
        "n": result.n,
        "observed_agreement": result.observed_agreement,
        "expected_agreement": result.expected_agreement,
        "confusion": result.confusion.as_dict(),
        "min_calibration": min_calibration,
        "labels_path": labels_path,
        "labels_sha256": sha256_file(labels_path),
        "calibration_path": calibration_path,
        "calibration_sha256": sha256_file(calibration_path),
    }


def run_kappa(
    labels_path: str, calibration_path: str, min_calibration: int, out: str
) -> dict[str, Any]:
    """Compute κ and write kappa.json atomically (nothing is written on error)."""
    for what, p in (("labels", labels_path), ("calibration", calibration_path)):
        if not os.path.exists(p):
            raise GrumemError(f"{what} file {p} does not exist")
    labels = load_labels(labels_path)
    calibration = load_labels(calibration_path)
    result = kappa_between(labels, calibration, min_calibration)
    record = kappa_record(result, str(labels_path), str(calibration_path), min_calibration)
    validate(record, "kappa", out)
    write_json(out, record)
    return record


def read_kappa(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A kappa.json, validated by workflow/schemas/kappa.schema.yaml."""
    with open(path, encoding="utf-8") as f:
        try:
            record = json.load(f)
        except json.JSONDecodeError as e:
            raise RecordError(path, e.lineno, None, f"bad JSON: {e.msg}") from None
    validate(record, "kappa", path)
    return record
