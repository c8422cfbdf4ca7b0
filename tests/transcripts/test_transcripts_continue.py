"""The Continue session reader (grumem.transcripts.formats.continue_dev).

The fixtures under fixtures/transcripts/continue/ were written for these tests in the
layouts of Continue's VS Code extension 0.8.68 and 2.1.0 and of its `cn` CLI
(fixtures/transcripts/continue/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from support.checkout import FIXTURES_DIR
from support.transcripts import assert_results_follow_calls, chunk_with_cli

C = FIXTURES_DIR / "transcripts" / "continue"
V08 = C / "5b2f0c1e-8d4a-4f7b-9e21-3c6a0d9b7e45.json"
V21 = C / "c81d4e2a-6f3b-4a09-b7d5-2e9f1a0c3b68.json"
CLI = C / "e4a7b9c2-3d1f-4e58-a6b0-9c2d7f1e8a34.json"
INDEX = C / "sessions.json"


def only(path: Path, fmt: str = "auto", drop_thinking: bool = False):
    _, [session] = read_transcript(path, fmt, drop_thinking)
    return session


@pytest.mark.parametrize("path", [V08, V21, CLI, INDEX], ids=lambda p: p.name)
def test_auto_detects_continue_files(path: Path) -> None:
    assert detect_format(path) == "continue"


def test_extension_08_one_tool_state_and_a_tool_item() -> None:
    s = only(V08)
    assert s.id == V08.stem
    assert [r["role"] for r in s.records] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "user",
    ]
    # the context item the user attached comes first, as Continue sends it
    assert s.records[0]["text"].startswith("```python tests/test_retry.py\n")
    assert s.records[0]["text"].endswith(
        "\n\nThe test test_retry_backoff fails about one run in five. Can you find out why?"
    )
    assert s.records[1]["text"] == (
        "I'll read the retry loop first.\n\n"
        'Tool call builtin_read_file: {"filepath":"httpkit/retry.py"}'
    )
    assert s.records[1]["source"]["model"] == "Claude 3.5 Sonnet"
    result = s.records[2]
    assert result["source"]["tool"] == "builtin_read_file"
    assert result["source"]["status"] == "done"
    assert "random.uniform(0, 0.1)" in result["text"]
    assert s.records[0]["source"]["session"] == {
        "title": "Fix flaky retry test in http client",
        "workspace": "file:///home/dana/src/httpkit",
    }
    assert dict(s.skipped) == {"empty assistant message": 1}  # the answer never streamed


def test_extension_21_thinking_errors_summary_and_image() -> None:
    s = only(V21)
    roles = [r["role"] for r in s.records]
    assert roles == [
        "user",
        "assistant",  # thinking item
        "assistant",  # reasoning + text + 2 calls
        "tool_result",
        "tool_result",
        "assistant",
        "system",  # the conversation summary
        "tool_result",
        "assistant",
        "user",
        "assistant",
    ]
    assert s.records[1]["text"].startswith("Thinking: The migrate command lives in cli.py")
    assert s.records[2]["text"].startswith("Thinking: Search for the command first")
    assert s.records[2]["source"]["tool_call_ids"] == ["toolu_02Grep", "toolu_03Read"]
    err = s.records[4]
    assert err["source"]["is_error"] is True and err["source"]["tool"] == "read_file"
    assert err["text"] == "File ledgerd/migrations/runner.py does not exist"
    assert s.records[6]["source"]["conversation_summary"] is True
    assert s.records[9]["text"] == "This is what I get now:\n\n[image: image/png, 384 bytes base64]"
    assert s.records[0]["source"]["session"]["model"] == "Claude Sonnet 4"
    assert_results_follow_calls(s)
    dropped = only(V21, drop_thinking=True)
    assert not any("Thinking:" in r["text"] for r in dropped.records)
    assert dict(dropped.skipped) == {"thinking": 2}


def test_cli_answers_from_tool_states() -> None:
    s = only(CLI)
    assert [r["role"] for r in s.records] == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert s.records[3]["text"].startswith("12:test:\n13-\tdocker compose up -d redis")
    assert s.records[5]["source"]["tool_call_id"] == "call_Zr82Conftest"
    # the cancelled call has no output: counted, not invented
    assert dict(s.skipped) == {"tool call without output": 1}
    assert_results_follow_calls(s)


def test_the_index_is_no_session_and_says_so() -> None:
    s = only(INDEX)
    assert s.records == []
    assert dict(s.skipped) == {"session index (not a session)": 1}


def test_unknown_roles_are_counted(tmp_path: Path) -> None:
    doc = json.loads(V08.read_text(encoding="utf-8"))
    doc["history"].append({"message": {"role": "narrator", "content": "x"}, "contextItems": []})
    f = tmp_path / "s.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    assert only(f).skipped["history item of role narrator"] == 1
    doc["history"][0]["message"]["content"] = [{"type": "video"}]
    f.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "continue")
    assert e.value.field == "history[0].message.content[0].type"


def test_chunk_cli_auto_and_by_name(tmp_path: Path) -> None:
    for fmt in ("auto", "continue"):
        err, files = chunk_with_cli(tmp_path, fmt, V08, V21, CLI, INDEX)
        assert f"{V21}: continue, 1 session(s)" in err
        assert "skipped: session index (not a session) 1" in err
        assert [p.stem for p in files] == sorted([V08.stem, V21.stem, CLI.stem])
