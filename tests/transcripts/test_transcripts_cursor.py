"""grumem.transcripts.formats.cursor: Cursor's state.vscdb (Composer, inline and split
bubbles; the chat panel before it) and the cursor-agent CLI's store.db.

The fixtures under fixtures/transcripts/cursor/ are built by
scripts/write_sqlite_transcript_fixtures.py in the layouts SOURCES.md names."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from grumem.errors import RecordError
from grumem.io.chunk_files import read_chunk_file
from grumem.transcripts import detect_format, read_transcript
from grumem.transcripts.base import Head
from grumem.transcripts.formats import cursor
from support.checkout import FIXTURES_DIR
from support.transcripts import chunk_cli, other_samples

C = FIXTURES_DIR / "transcripts" / "cursor"
GLOBAL = C / "globalStorage" / "state.vscdb"
INLINE = C / "globalStorage-0.44" / "state.vscdb"
PANEL = C / "workspaceStorage-chat" / "state.vscdb"
CLI = C / "chats" / "store.db"
ALL = [GLOBAL, INLINE, PANEL, CLI]
COMPOSER = "3f2a9c1e-7b4d-4e0a-9c55-1d2e3f4a5b6c"
SUB = "8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"


def sessions(path: Path, fmt: str = "auto", drop_thinking: bool = False) -> dict:
    found, read = read_transcript(path, fmt, drop_thinking)
    assert found == "cursor"
    return {s.id: s for s in read}


def roles(session) -> list[str]:
    return [r["role"] for r in session.records]


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(C)))
def test_auto_and_by_name(path: Path) -> None:
    assert detect_format(path) == "cursor"
    assert sessions(path, "cursor").keys() == sessions(path).keys()


@pytest.mark.parametrize("path", other_samples("cursor"), ids=lambda p: p.name)
def test_refuses_other_formats_samples(path: Path) -> None:
    assert not cursor.detect(path, Head(path))


def test_composer_of_split_bubbles_with_tools_errors_and_a_subagent() -> None:
    s = sessions(GLOBAL)
    assert list(s) == [COMPOSER, SUB]  # the deleted conversation (JSON null) is no session
    main = s[COMPOSER]
    assert roles(main) == [
        "user",
        "assistant",  # thinking + text
        "assistant",  # grep call
        "tool_result",
        "assistant",  # text + edit call
        "tool_result",
        "assistant",  # failed run
        "tool_result",
        "user",
        "assistant",  # cancelled run: no result
        "assistant",
        "tool_result",
        "assistant",
    ]
    texts = [r["text"] for r in main.records]
    assert texts[1].startswith("Thinking: A UnicodeEncodeError on write usually means")
    assert texts[1].endswith("\n\nLet me find where the export writes the CSV.")
    assert texts[2] == (
        'Tool call grep_search: {"query":"open(","include_pattern":"billing/export/*.py"}'
    )
    assert texts[4].startswith("The writer opens the file with the locale's encoding.")
    assert "Tool call edit_file: " in texts[4] and '"target_file":"billing' in texts[4]
    error = main.records[7]
    assert error["source"]["is_error"] is True and error["source"]["tool"] == "run_terminal_cmd"
    assert "ModuleNotFoundError: No module named 'freezegun'" in error["text"]
    assert all("is_error" not in r["source"] for r in main.records if r is not error)
    calls = [c for r in main.records for c in r["source"].get("call_ids", [])]
    results = [r["source"]["call_id"] for r in main.records if r["role"] == "tool_result"]
    assert set(results) < set(calls) and "toolu_04Run" not in results
    assert dict(main.skipped) == {
        "missing bubble": 1,
        "empty assistant bubble": 1,
        "tool call cancelled": 1,
    }
    first = main.records[0]["source"]
    assert first["title"] == "Fix UnicodeEncodeError in invoice export"
    assert (first["created"], first["updated"]) == (1772442845000, 1772442950000)
    assert first["model"] == "claude-4.5-sonnet" and first["bubble_id"] == "b-01"
    assert first["time"] == "2026-03-02T09:14:05.120Z"
    # the sub-composer is a session of its own, its first bubble from conversationMap
    sub = s[SUB]
    assert roles(sub) == ["user", "assistant", "tool_result", "assistant"]
    assert sub.records[0]["source"]["parent"] == COMPOSER
    assert sub.records[0]["text"] == "List every call site that writes customer names to a file."


def test_never_reads_the_login_token() -> None:
    every = json.dumps([s.records for s in sessions(GLOBAL).values()])
    assert "fixture-not-a-real-token" not in every


def test_thinking_dropped_and_counted() -> None:
    main = sessions(GLOBAL, drop_thinking=True)[COMPOSER]
    assert main.records[1]["text"] == "Let me find where the export writes the CSV."
    assert main.skipped["thinking"] == 1


def test_inline_conversation_of_0_4x() -> None:
    (s,) = sessions(INLINE).values()
    assert roles(s) == ["user", "assistant", "user", "assistant"]
    assert s.records[1]["text"].endswith("```python\nbucket = TokenBucket(rate=30, per=60)\n```")
    assert s.records[0]["source"]["title"] == "Rate limit the webhook endpoint"


def test_chat_panel_tabs_text_and_raw_text() -> None:
    (s,) = sessions(PANEL).values()
    assert s.id == "tab-5e1f"
    assert roles(s) == ["user", "assistant", "user", "assistant"]
    assert s.records[1]["text"].startswith("Before Postgres 11 a column with a default")
    assert s.records[0]["source"]["title"] == "Why does the migration lock the table?"


def test_cli_store_in_root_blob_order() -> None:
    (s,) = sessions(CLI).values()
    assert s.id == "93d7b323-695c-4b84-8b69-d48bb88ae780"
    assert roles(s) == ["system", "user", "assistant", "tool_result", "assistant"]
    assert s.records[2]["text"] == (
        "Thinking: Run the linter and read its first error.\n\n"
        'Tool call Shell: {"command":"make lint","description":"Run the linters"}'
    )
    assert s.records[3]["source"]["call_id"] == "toolu_cli_1"
    assert s.records[3]["text"].startswith("Exit code: 1\n\nCommand output:\nsrc/api/routes.py")
    assert dict(s.skipped) == {"non-JSON message blob": 1}
    assert s.records[0]["source"]["model"] == "gpt-5"
    assert [r["source"]["index"] for r in s.records] == [0, 1, 2, 3, 5]


def test_root_blob_fields_other_than_1_and_cut_blobs() -> None:
    ids = cursor.message_ids(b"\x0a\x20" + b"\x01" * 32 + b"\x4a\x03abc" + b"\x10\x05", "f", "r")
    assert ids == ["01" * 32]
    with pytest.raises(RecordError, match="cut short"):
        cursor.message_ids(b"\x0a\x20\x01", "f", "r")


def test_vscode_state_without_cursor_chats_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "state.vscdb"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
    conn.execute("INSERT INTO ItemTable VALUES ('workbench.sideBar.hidden', 'false')")
    conn.commit()
    conn.close()
    verdict = cursor.detect(db, Head(db))
    assert not verdict and "without Cursor's chats" in verdict.reason


def test_a_bubble_that_is_not_json_names_its_key(tmp_path: Path) -> None:
    db = tmp_path / "state.vscdb"
    db.write_bytes(GLOBAL.read_bytes())
    conn = sqlite3.connect(db)
    conn.execute(
        "UPDATE cursorDiskKV SET value = ? WHERE key = ?",
        (b"{not json", f"bubbleId:{COMPOSER}:b-03"),
    )
    conn.commit()
    conn.close()
    with pytest.raises(RecordError) as e:
        read_transcript(db, "cursor")
    assert e.value.field == f"cursorDiskKV[bubbleId:{COMPOSER}:b-03]"


def test_chunk_cli_auto_writes_a_chunk_file_per_session(tmp_path: Path) -> None:
    err = chunk_cli(tmp_path / "out", ALL)
    for path, n in zip(ALL, (2, 1, 1, 1), strict=True):
        assert f"{path}: cursor, {n} session(s)" in err
    main = read_chunk_file(tmp_path / "out" / f"{COMPOSER}.jsonl")
    records = [r for chunk in main for r in chunk.records]
    assert records[0]["role"] == "user" and records[0]["text"].startswith("The nightly invoice")
    assert records[0]["source"]["bubble_id"] == "b-01"
