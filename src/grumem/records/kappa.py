"""kappa.json (workflow/schemas/kappa.schema.yaml): Cohen's kappa between the labels
and an independent calibration, with the sha256 of both files, required by the export."""

from __future__ import annotations

from typing import Annotated, TypeAlias

import msgspec

from grumem.records.base import Count, Positive, Record, Sha256

__all__ = ["Confusion", "KappaCalibration"]


# JSON numbers in a range, integer or not (an integer read stays an integer)
Kappa: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=-1, le=1)] | Annotated[float, msgspec.Meta(ge=-1, le=1)]
)
Rate: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=0, le=1)] | Annotated[float, msgspec.Meta(ge=0, le=1)]
)
ExpectedRate: TypeAlias = (
    Annotated[int, msgspec.Meta(ge=0, lt=1)] | Annotated[float, msgspec.Meta(ge=0, lt=1)]
)


class Confusion(Record, frozen=True):
    """labels x calibration: yes_no means the labels say evidence, the calibration not."""

    yes_yes: Count
    yes_no: Count
    no_yes: Count
    no_no: Count


class KappaCalibration(Record, frozen=True):
    """The agreement the export's gate reads (no timestamps: reruns are byte-identical)."""

    kappa: Kappa
    n: Positive
    observed_agreement: Rate
    expected_agreement: ExpectedRate
    confusion: Confusion
    min_calibration: Positive
    labels_path: str
    labels_sha256: Sha256
    calibration_path: str
    calibration_sha256: Sha256
