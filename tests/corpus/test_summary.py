"""The export's summary (grumem.corpus.summary): its counts as the job's log prints
them (the counts themselves: a8 in tests/stages/test_stage_export.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from grumem.stages.export import TURNS
from support.export import export_command


def test_cli_prints_summary(work: Path) -> None:
    proc = export_command(work, work / "corpus")
    assert proc.returncode == 0, proc.stderr
    assert "5 trajectories (6 in the log), 24 turns" in proc.stderr
    assert "r_update: +1 19, -1 5" in proc.stderr
    assert "pass rate 80.0%" in proc.stderr
    assert "t_last_evidence: t=1: 1, t=2: 1, t=5: 2" in proc.stderr
    assert "aborted trajectories: 2 (budget 1, request_failed 1" in proc.stderr
    assert pq.read_table(work / "corpus" / TURNS).column("data_source").to_pylist() == ["demo"] * 24
