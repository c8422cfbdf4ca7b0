"""The command's error handling: where messages go, and what it never writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem import cli

RESPONSES = ["responses", "--settings", "{}", "--prompts", "p.jsonl", "--out", "r.jsonl"]
JUDGE = ["judge", "--settings", "{}", "--project", "demo", "--queries", "q.yaml", "--out",
         "r.jsonl", "--unparsed", "u.jsonl", "c.jsonl"]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "settings_reader"),
    [
        (RESPONSES, "grumem.config.settings.settings_from_args"),
        (JUDGE, "grumem.stages.judge.settings_from_args"),
    ],
    ids=["responses", "judge"],
)
def test_an_internal_error_reaches_the_jobs_progress_log(
    tmp_path: Path, monkeypatch, argv: list[str], settings_reader: str
) -> None:
    # The responses and judge rules send stderr to the terminal and only the
    # progress log to {log}: a bug's traceback must be in that log too.
    def boom(args, **_):
        raise RuntimeError("boom: a bug, not bad input")

    monkeypatch.setattr(settings_reader, boom)
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "job.log"
    with pytest.raises(RuntimeError):
        cli.main([*argv, "--log", str(log)])
    text = log.read_text(encoding="utf-8")
    assert f"grumem {argv[0]}: internal error:" in text
    assert "Traceback (most recent call last)" in text
    assert "RuntimeError: boom: a bug, not bad input" in text
    assert not (tmp_path / "r.jsonl").exists()


def test_everything_on_stderr_reaches_the_log_once(tmp_path: Path, capsys) -> None:
    """The responses and judge rules give {log} as --log: the statistics printed at
    the end reach it (before, only the progress did), and no line twice."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(b"")
    settings = json.dumps({"llm": {"mode": "replay", "cache_dir": str(tmp_path / "cache")}})
    log = tmp_path / "job.log"
    argv = ["responses", "--settings", settings, "--out", str(tmp_path / "r.jsonl")]
    assert cli.main([*argv, "--prompts", str(prompts), "--log", str(log)]) == 0
    text = log.read_text(encoding="utf-8")
    assert "responses: {'turns': 0, 'asks': 0, 'parsed': 0, 'aborted': 0}" in text
    assert text.count("turns 0/0 (100%)") == 1
    assert text == capsys.readouterr().err  # the terminal shows the same lines
    # an error too, once
    missing = tmp_path / "missing.jsonl"
    assert cli.main([*argv, "--prompts", str(missing), "--log", str(log)]) != 0
    error = log.read_text(encoding="utf-8").removeprefix(text)
    assert error.count("grumem responses: error:") == 1 and str(missing) in error
    assert not (tmp_path / "r.jsonl").read_bytes()
