"""One typed class per record that crosses a boundary: each schema in workflow/schemas/
but config.schema.yaml and queries.schema.yaml (settings a person writes in YAML,
loaded and checked by grumem.config, not records a stage writes for another).

    records/base.py        Record: decode, convert, encode; its fields read as attributes
    records/chunk.py       ChunkLine (chunk), ChunkManifest (chunk-manifest)
    records/session_index.py     SessionIndexEntry (session)
    records/prompt.py      PromptRecord (prompt)
    records/response.py    ExchangeRecord | AbortRecord (response); Request, Attempt
    records/gate.py        GateRecord (gate); ParseFailure
    records/log.py         LogLine (log)
    records/label.py       Label (label), UnjudgedPair (unjudged),
                           CalibrationSample (calibration-sample)
    records/kappa.py       KappaCalibration (kappa)
    records/trajectory.py  Trajectory (trajectory)
    records/summary.py     CorpusSummary (summary)
    records/rollout_row.py RolloutRow (session-row): a row of sessions.parquet

SCHEMAS maps each schema's name to its type; grumem.io.typed reads and writes JSON
Lines through them, the schema (the contract) deciding what the C check refuses.
This package imports only grumem.errors and msgspec.
"""

from __future__ import annotations

from typing import Any

from grumem.records.chunk import ChunkLine, ChunkManifest
from grumem.records.gate import GateRecord
from grumem.records.kappa import KappaCalibration
from grumem.records.label import CalibrationSample, Label, UnjudgedPair
from grumem.records.log import LogLine
from grumem.records.prompt import PromptRecord
from grumem.records.response import ResponseRecord
from grumem.records.rollout_row import RolloutRow
from grumem.records.session_index import SessionIndexEntry
from grumem.records.summary import CorpusSummary
from grumem.records.trajectory import Trajectory

__all__ = ["SCHEMAS", "schema_name"]

# the schema of each record type, by its name in workflow/schemas/
SCHEMAS: dict[str, Any] = {
    "calibration-sample": CalibrationSample,
    "chunk": ChunkLine,
    "chunk-manifest": ChunkManifest,
    "gate": GateRecord,
    "kappa": KappaCalibration,
    "label": Label,
    "log": LogLine,
    "prompt": PromptRecord,
    "response": ResponseRecord,
    "session-index": SessionIndexEntry,
    "rollout-row": RolloutRow,
    "summary": CorpusSummary,
    "trajectory": Trajectory,
    "unjudged": UnjudgedPair,
}


def schema_name(kind: Any) -> str:
    """The schema a record type mirrors (its name in workflow/schemas/)."""
    for name, k in SCHEMAS.items():
        if k == kind:
            return name
    raise KeyError(f"{kind!r} is no record type of grumem.records")
