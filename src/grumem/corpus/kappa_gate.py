"""The export's κ gate: no corpus without a kappa.json (rule `kappa`,
grumem.core.kappa) that clears `export.min_kappa` and was computed for the
current labels file: rewards are only as good as the labels."""

from __future__ import annotations

import json
import os

from grumem.core.json_text import stdlib_loads
from grumem.errors import ExportRefused, RecordError
from grumem.io.jsonl import sha256_file
from grumem.io.typed import checked_document
from grumem.records.kappa import KappaCalibration


def check_kappa(kappa_path: str, labels_path: str, min_kappa: float) -> KappaCalibration:
    """The kappa.json the export may rely on, or ExportRefused saying why not."""
    if not min_kappa >= 0:
        raise ExportRefused(
            f"export.min_kappa {min_kappa} is below 0 (chance agreement): the calibration"
            " check cannot be switched off; set a threshold between 0 and 1"
        )
    if not os.path.exists(kappa_path):
        raise ExportRefused(
            f"no calibration: {kappa_path} does not exist. The export is refused until the labels"
            " are calibrated: have someone label a sample of (query_id, chunk_sha) pairs a second"
            " time (grumem calibrate-sample, then calibrate-finalize), set the project's"
            " `calibration` file and run rule `kappa`"
            " (grumem kappa --labels … --calibration … --out kappa.json)"
        )
    record = read_kappa(kappa_path)
    labels_sha = sha256_file(labels_path)
    if record.labels_sha256 != labels_sha:
        raise ExportRefused(
            f"stale calibration: {kappa_path} was computed for labels with sha256"
            f" {record.labels_sha256[:12]}…, but {labels_path} now has {labels_sha[:12]}…;"
            " rerun rule `kappa` on the current labels"
        )
    if record.kappa < min_kappa:
        raise ExportRefused(
            f"calibration too weak: Cohen's kappa {record.kappa:.4f} over {record.n} pairs"
            f" ({kappa_path}) is below export.min_kappa {min_kappa}: the labels the rewards are"
            " computed from disagree too much with the independent calibration;"
            " revise the labelling guide or the labels, then rerun rule `kappa`"
        )
    return record


def read_kappa(path: str | os.PathLike[str]) -> KappaCalibration:
    """A kappa.json, checked as workflow/schemas/kappa.schema.yaml says."""
    with open(path, encoding="utf-8") as f:
        try:
            record = stdlib_loads(f.read())
        except json.JSONDecodeError as e:
            raise RecordError(path, e.lineno, None, f"bad JSON: {e.msg}") from None
    return checked_document(record, KappaCalibration, path)
