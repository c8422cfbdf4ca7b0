"""The export's κ gate (grumem.corpus.kappa_gate): a kappa.json below the threshold,
computed for other labels, or a threshold below chance refuses the export."""

from __future__ import annotations

from pathlib import Path

import pytest

from grumem.core.json_text import dumps
from grumem.errors import ExportRefused, RecordError
from grumem.stages.export import export
from support.export import assert_nothing_written, calibrate, inputs


def test_kappa_below_threshold_refuses(work: Path) -> None:
    why = r"kappa 0\.7547 over 26 pairs .* below export.min_kappa 0\.8"
    with pytest.raises(ExportRefused, match=why):
        export(inputs(work, min_kappa=0.8))
    assert_nothing_written(work / "corpus")


def test_stale_kappa_refuses(work: Path) -> None:
    with open(work / "labels.jsonl", "a", encoding="utf-8") as f:
        f.write(
            dumps(
                {
                    "query_id": "q3",
                    "chunk_sha": "0" * 64,
                    "evidence": True,
                    "annotator": "late-edit",
                }
            )
            + "\n"
        )
    with pytest.raises(ExportRefused, match="stale calibration"):
        export(inputs(work))
    assert_nothing_written(work / "corpus")
    calibrate(work)  # rerunning kappa on the current labels lifts the refusal
    export(inputs(work))


def test_min_kappa_cannot_switch_the_gate_off(work: Path) -> None:
    """export.min_kappa has a minimum of 0 in the schema, and the export refuses a
    negative threshold passed to it."""
    from grumem.config.settings import validate_config

    project = {"p": {"chunks": "c/*.jsonl", "queries": "q.yaml"}}
    with pytest.raises(RecordError) as e:
        validate_config({"projects": project, "export": {"min_kappa": -1}})
    assert e.value.field == "export.min_kappa"
    assert validate_config({"projects": project})["export"]["min_kappa"] == 0.6
    description = _min_kappa_schema()["description"]
    assert "refused" in description and "kappa" in description
    with pytest.raises(ExportRefused, match="min_kappa -1"):
        export(inputs(work, min_kappa=-1))
    assert_nothing_written(work / "corpus")


def _min_kappa_schema() -> dict:
    from grumem.io.jsonl import schema

    return schema("config")["properties"]["export"]["properties"]["min_kappa"]
