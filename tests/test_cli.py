"""The command's error handling: where messages go, and what it never writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from grumem import cli


def test_an_internal_error_reaches_the_jobs_progress_log(tmp_path: Path, monkeypatch) -> None:
    # The responses and judge rules send stderr to the terminal and only the
    # progress log to {log}: a bug's traceback must be in that log too.
    def boom(args):
        raise RuntimeError("boom: a bug, not bad input")

    monkeypatch.setattr(cli, "settings_from_args", boom)
    log = tmp_path / "responses.log"
    with pytest.raises(RuntimeError):
        cli.main(["responses", "--settings", "{}", "--prompts", str(tmp_path / "p.jsonl"),
                  "--out", str(tmp_path / "r.jsonl"), "--log", str(log)])  # fmt: skip
    text = log.read_text(encoding="utf-8")
    assert "grumem responses: internal error:" in text
    assert "Traceback (most recent call last)" in text
    assert "RuntimeError: boom: a bug, not bad input" in text
    assert not (tmp_path / "r.jsonl").exists()
