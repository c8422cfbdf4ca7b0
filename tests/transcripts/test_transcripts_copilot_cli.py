"""The GitHub Copilot CLI event-log reader (grumem.transcripts.formats.copilot_cli).

The fixtures under fixtures/transcripts/copilot-cli/ were written for these tests in the
event schema of CLI 0.0.382 and 1.0.81 (fixtures/transcripts/copilot-cli/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem.transcripts import detect_format, read_transcript
from support.checkout import FIXTURES_DIR
from support.transcripts import assert_results_follow_calls, chunk_with_cli

P = FIXTURES_DIR / "transcripts" / "copilot-cli"
OLD_ID = "7c1e4a2b-9f30-4d85-b6e1-0a2c3d4e5f60"
NEW_ID = "d2f8a6c4-1b3e-4f70-9a5d-8e7c6b5a4f31"
OLD = P / f"{OLD_ID}.jsonl"  # named as 2025 releases named it: <id>.jsonl
NEW = P / f"{NEW_ID}.jsonl"  # a CLI 1.0 file, <id>/events.jsonl on disk


def sessions(path: Path, drop_thinking: bool = False) -> dict:
    _, found = read_transcript(path, "auto", drop_thinking)
    return {s.id: s for s in found}


@pytest.mark.parametrize("path", [OLD, NEW], ids=lambda p: p.name)
def test_auto_detects_copilot_cli_events(path: Path) -> None:
    assert detect_format(path) == "copilot-cli"


def test_old_subagent_by_parent_tool_call() -> None:
    s = sessions(OLD)
    assert list(s) == [OLD_ID, f"{OLD_ID}-agent-toolu_vrtx_02Task"]
    main, sub = s[OLD_ID], s[f"{OLD_ID}-agent-toolu_vrtx_02Task"]
    assert [r["role"] for r in main.records] == [
        "user",
        "assistant",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert main.records[1]["text"].startswith("Thinking: Off-by-a-cent")
    assert main.records[5]["source"]["tool"] == "task"
    assert [r["role"] for r in sub.records] == ["assistant", "tool_result", "assistant"]
    main_text = "\n".join(r["text"] for r in main.records)
    assert "toolu_vrtx_S1" not in str([r["source"] for r in main.records])
    assert "round\\\\(" not in main_text  # the subagent's grep stays in its session
    assert main.skipped["tool.execution_start"] == 2 and sub.skipped["tool.execution_start"] == 1
    for session in s.values():
        assert_results_follow_calls(session)


def test_new_agent_ids_errors_compaction_and_title() -> None:
    s = sessions(NEW)
    assert list(s) == [NEW_ID, f"{NEW_ID}-agent-agent-7f2e1c0d"]
    main = s[NEW_ID]
    assert main.records[0]["role"] == "system"
    assert main.records[0]["source"]["session"]["title"] == "Paginate GET /notes"
    assert main.records[0]["source"]["session"]["version"] == "1.0.81"
    first = main.records[2]
    assert first["text"].startswith("Thinking: The handler returns every note")
    assert first["source"]["model"] == "gpt-5.1"
    assert first["source"]["tool_call_ids"] == ["call_v2Read", "call_v2Task"]
    denied = next(r for r in main.records if r["source"].get("tool_call_id") == "call_v2Edit")
    assert denied["source"]["is_error"] is True
    assert denied["text"] == "Permission denied: the user declined this edit."
    summary = [r for r in main.records if r["source"].get("type") == "session.compaction_complete"]
    assert len(summary) == 1
    sub = s[f"{NEW_ID}-agent-agent-7f2e1c0d"]
    assert sub.records[0]["role"] == "user"
    for session in s.values():
        assert_results_follow_calls(session)
    dropped = sessions(NEW, drop_thinking=True)[NEW_ID]
    assert dropped.skipped["thinking"] == 1


def test_unknown_events_are_counted(tmp_path: Path) -> None:
    lines = OLD.read_text(encoding="utf-8").splitlines()
    lines.append(
        json.dumps(
            {"type": "future.event", "data": {}, "id": "x", "timestamp": "t", "parentId": None}
        )
    )
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert sessions(f)[OLD_ID].skipped["future.event"] == 1


def test_chunk_cli_auto_and_by_name(tmp_path: Path) -> None:
    for fmt in ("auto", "copilot-cli"):
        err, files = chunk_with_cli(tmp_path, fmt, NEW)
        assert f"{NEW}: copilot-cli, 2 session(s)" in err
        assert sorted(p.stem for p in files) == sorted([NEW_ID, f"{NEW_ID}-agent-agent-7f2e1c0d"])
