"""grumem.transcripts.formats.kilo: Kilo CLI's kilo.db (OpenCode's schema, read by its
code) and Kilo Code's older VS Code tasks (Cline's layout, the anthropic format).

fixtures/transcripts/kilo/kilo.db is built by scripts/write_sqlite_transcript_fixtures.py."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from grumem.transcripts import detect_format, read_transcript
from grumem.transcripts.base import Head
from grumem.transcripts.formats import kilo
from support.checkout import FIXTURES_DIR
from support.transcripts import chunk_cli, other_samples

T = FIXTURES_DIR / "transcripts"
DB = T / "kilo" / "kilo.db"
SID = "ses_5c7a2e10b8ffQwErTyUiOp9876"


def test_auto_and_by_name() -> None:
    assert detect_format(DB) == "kilo"
    for fmt in ("auto", "kilo"):
        found, (s,) = read_transcript(DB, fmt)
        assert found == "kilo" and s.id == SID
        assert [r["role"] for r in s.records] == ["user", "assistant", "tool_result", "assistant"]
        assert s.records[2]["source"]["tool"] == "read"
        assert s.records[3]["text"].startswith("Added `--dry-run`")
        assert dict(s.skipped) == {"session_entry:checkpoint": 1}
        assert s.records[0]["source"]["title"] == "Dry run for sync"


@pytest.mark.parametrize("path", other_samples("kilo"), ids=lambda p: p.name)
def test_refuses_other_formats_samples(path: Path) -> None:
    assert not kilo.detect(path, Head(path))


def test_named_kilo_db_without_kilo_columns_is_kilo(tmp_path: Path) -> None:
    """A store Kilo wrote before it added its own columns: told by its name."""
    renamed = tmp_path / "kilo.db"
    shutil.copyfile(T / "opencode" / "opencode.db", renamed)
    assert detect_format(renamed) == "kilo"
    plain = tmp_path / "store.db"
    shutil.copyfile(DB, plain)
    assert detect_format(plain) == "kilo"  # Kilo's columns, whatever its name


def test_vs_code_extension_tasks_are_anthropic(tmp_path: Path) -> None:
    """Kilo Code (the VS Code extension) kept Cline's task layout: the anthropic format
    reads it, the task folder naming the session."""
    task = tmp_path / "kilocode.kilo-code" / "tasks" / "1737234567890"
    task.mkdir(parents=True)
    history = task / "api_conversation_history.json"
    shutil.copyfile(T / "anthropic" / "invoice-pager-offset.json", history)
    fmt, (s,) = read_transcript(history)
    assert fmt == "anthropic" and s.id == "1737234567890"
    assert not kilo.detect(history, Head(history))


def test_chunk_cli_auto(tmp_path: Path) -> None:
    err = chunk_cli(tmp_path / "out", [DB])
    assert f"{DB}: kilo, 1 session(s)" in err
    assert (tmp_path / "out" / f"{SID}.jsonl").is_file()


def test_read_does_not_touch_the_store(tmp_path: Path) -> None:
    db = tmp_path / "kilo.db"
    shutil.copyfile(DB, db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("UPDATE session SET title = 'renamed while open'")
    conn.commit()  # the change is in the -wal, the writer still open
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    _, (s,) = read_transcript(db)
    assert s.records[0]["source"]["title"] == "renamed while open"
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    conn.close()
