"""The Copilot Chat session reader (grumem.transcripts.formats.copilot_chat): the
`.jsonl` journal replayed, the older `.json` read whole.

The fixtures under fixtures/transcripts/copilot-chat/ were written for these tests in
VS Code's storage layouts (fixtures/transcripts/copilot-chat/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from grumem.transcripts.formats.copilot_chat import replay
from support.checkout import FIXTURES_DIR
from support.transcripts import assert_results_follow_calls, chunk_with_cli

P = FIXTURES_DIR / "transcripts" / "copilot-chat"
OLD = P / "6a0f3e1d-9c8b-4a7e-b5d4-3c2b1a0f9e8d.json"
LOG = P / "b4e1c9a2-7d30-4f6b-8e15-2a9c0d3f6e71.jsonl"


def only(path: Path, drop_thinking: bool = False):
    _, [session] = read_transcript(path, "auto", drop_thinking)
    return session


@pytest.mark.parametrize("path", [OLD, LOG], ids=lambda p: p.name)
def test_auto_detects_copilot_chat_sessions(path: Path) -> None:
    assert detect_format(path) == "copilot-chat"


def test_journal_replay_sets_pushes_cuts_and_deletes() -> None:
    state = replay(str(LOG))
    assert state["customTitle"] == "Dev server EADDRINUSE on restart"
    # the request the user took back is gone: the push cut the array at 1
    assert [r["message"]["text"] for r in state["requests"]] == [
        "The dev server crashes with EADDRINUSE after a restart. Fix it.",
        "Actually, just print the port in use instead.",
    ]
    assert "selectedModel" not in state["inputState"]


def test_agent_rounds_and_tool_results() -> None:
    s = only(LOG)
    assert s.id == LOG.stem
    assert [r["role"] for r in s.records] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
        "user",
        "assistant",
    ]
    assert s.records[1]["text"].startswith(
        "Thinking: EADDRINUSE after restart: the old process is still alive, or the new one"
    )
    assert s.records[1]["text"].endswith(
        'Tool call run_in_terminal: {"command":"lsof -i :5173",'
        '"explanation":"Find the process on the dev port","isBackground":false}'
    )
    assert s.records[2]["text"].startswith("COMMAND   PID")
    assert s.records[4]["source"]["tool"] == "read_file"
    assert dict(s.skipped) == {
        "tool result part not text": 1,
        "tool result not recorded": 1,
        "toolInvocationSerialized": 2,
    }
    assert_results_follow_calls(s)


def test_older_json_markdown_thinking_and_ui_parts() -> None:
    s = only(OLD)
    assert [r["role"] for r in s.records] == ["user", "assistant", "user", "assistant"]
    assert s.records[1]["text"].startswith("`--follow` detects renames by content similarity")
    assert s.records[3]["text"].startswith("Thinking: They want each commit's path shown")
    assert s.records[0]["source"]["model"] == "copilot/gpt-4.1"
    assert s.records[0]["source"]["session"]["title"] == "git log --follow and renames"
    assert dict(s.skipped) == {"inlineReference": 1, "codeblockUri": 1}
    assert dict(only(OLD, drop_thinking=True).skipped)["thinking"] == 1


def test_a_journal_line_that_does_not_apply_names_itself(tmp_path: Path) -> None:
    lines = LOG.read_text(encoding="utf-8").splitlines()
    lines.insert(2, json.dumps({"kind": 1, "k": ["requests", 7, "response"], "v": []}))
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "copilot-chat")
    assert e.value.line == 3


def test_chunk_cli_auto_and_by_name(tmp_path: Path) -> None:
    for fmt in ("auto", "copilot-chat"):
        err, files = chunk_with_cli(tmp_path, fmt, OLD, LOG)
        assert f"{LOG}: copilot-chat, 1 session(s)" in err
        assert sorted(p.stem for p in files) == sorted([OLD.stem, LOG.stem])
