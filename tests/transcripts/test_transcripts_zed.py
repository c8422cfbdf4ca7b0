"""grumem.transcripts.formats.zed: Zed's threads.db, zstd-compressed DbThread 0.3.0 rows
and the first agent panel's threads.

The fixtures under fixtures/transcripts/zed/ are built by
scripts/write_sqlite_transcript_fixtures.py from the schema SOURCES.md names."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from grumem.transcripts.base import Head
from grumem.transcripts.formats import zed
from support.checkout import FIXTURES_DIR
from support.transcripts import chunk_cli, other_samples

Z = FIXTURES_DIR / "transcripts" / "zed"
CURRENT = Z / "threads.db"
LEGACY = Z / "legacy" / "threads.db"
MAIN = "a7c1e3f5-0b2d-4f6a-8c9e-1a2b3c4d5e6f"
SUB = "b8d2f4a6-1c3e-4a7b-9d0f-2b3c4d5e6f70"


def sessions(path: Path, fmt: str = "auto", drop_thinking: bool = False) -> dict:
    found, read = read_transcript(path, fmt, drop_thinking)
    assert found == "zed"
    return {s.id: s for s in read}


def roles(session) -> list[str]:
    return [r["role"] for r in session.records]


@pytest.mark.parametrize("path", [CURRENT, LEGACY], ids=["current", "legacy"])
def test_auto_and_by_name(path: Path) -> None:
    assert detect_format(path) == "zed"
    assert sessions(path, "zed").keys() == sessions(path).keys()


@pytest.mark.parametrize("path", other_samples("zed"), ids=lambda p: p.name)
def test_refuses_other_formats_samples(path: Path) -> None:
    assert not zed.detect(path, Head(path))


def test_current_threads_mentions_tools_resume_and_a_subagent() -> None:
    s = sessions(CURRENT)
    assert list(s) == [MAIN, SUB]
    main = s[MAIN]
    assert roles(main) == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
        "user",
        "assistant",
    ]
    user = main.records[0]["text"]
    assert user.startswith('Fix the E0502 error in \n\n[mention {"File":{"abs_path":')
    assert user.endswith("self.advance();\n    t.clone()\n}")
    agent = main.records[1]
    assert agent["text"].startswith("Thinking: `t` borrows self.tokens immutably")
    assert 'Tool call terminal: {"command":"cargo check","cd":"mdlite"}' in agent["text"]
    assert agent["source"]["call_ids"] == ["toolu_z1", "toolu_z2"]
    edit, check = main.records[2], main.records[3]
    assert (
        edit["text"].startswith("Edited mdlite/src/parser.rs:") and "is_error" not in edit["source"]
    )
    assert check["source"]["call_id"] == "toolu_z2"
    assert check["source"]["is_error"] is True and check["source"]["tool"] == "terminal"
    assert "error[E0308]: mismatched types" in check["text"]
    assert main.records[5]["text"] == "Continue where you left off"
    assert dict(main.skipped) == {"redacted thinking": 1}
    first = main.records[0]["source"]
    assert first["title"] == "Borrow checker error in the parser"
    assert first["model"] == "zed.dev/claude-sonnet-4-5"
    sub = s[SUB]
    assert sub.records[0]["source"]["parent"] == MAIN
    assert sub.records[2]["text"] == "src/parser.rs:41: let t = &self.tokens[self.pos];"


def test_legacy_threads_zstd_and_plain_json() -> None:
    s = sessions(LEGACY)
    assert list(s) == [
        "d0f4b6c8-3e5a-4c9d-b1f2-4d5e6f7a8b92",
        "c9e3a5b7-2d4f-4b8c-a0e1-3c4d5e6f7a81",
    ]
    unversioned, v2 = s.values()
    assert roles(unversioned) == ["user", "assistant"]
    assert roles(v2) == ["user", "assistant", "tool_result", "assistant"]
    assert v2.records[0]["text"].endswith(
        "pub fn routes() -> Router { Router::new() }\n```\n</files>"
    )
    assert v2.records[2]["source"]["tool"] == "edit_file"
    assert v2.records[1]["text"].startswith("Thinking: Read the sha at build time with env!().")
    assert dict(v2.skipped) == {"redacted thinking": 1}


def test_thinking_dropped_and_counted() -> None:
    main = sessions(CURRENT, drop_thinking=True)[MAIN]
    assert main.records[1]["text"].startswith("`t` keeps an immutable borrow")
    assert main.skipped["thinking"] == 1


def test_a_corrupt_frame_names_its_thread(tmp_path: Path) -> None:
    db = tmp_path / "threads.db"
    shutil.copyfile(CURRENT, db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE threads SET data = x'28b52ffd0000' WHERE id = ?", (SUB,))
    conn.commit()
    conn.close()
    with pytest.raises(RecordError) as e:
        read_transcript(db, "zed")
    assert e.value.field == f"threads[{SUB}].data"


def test_chunk_cli_auto(tmp_path: Path) -> None:
    err = chunk_cli(tmp_path / "out", [CURRENT, LEGACY])
    assert f"{CURRENT}: zed, 2 session(s)" in err and f"{LEGACY}: zed, 2 session(s)" in err
    assert (tmp_path / "out" / f"{MAIN}.jsonl").is_file()


def test_a_frame_expanding_past_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zed, "MAX_THREAD_BYTES", 100)
    with pytest.raises(RecordError, match="decompresses past"):
        read_transcript(CURRENT, "zed")
