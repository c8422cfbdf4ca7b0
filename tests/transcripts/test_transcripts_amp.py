"""The Amp thread reader (grumem.transcripts.formats.amp).

The fixtures under fixtures/transcripts/amp/ were written for these tests in the
thread layout public readers of Amp document (fixtures/transcripts/amp/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grumem.transcripts import detect_format, read_transcript
from support.checkout import FIXTURES_DIR
from support.transcripts import assert_results_follow_calls, chunk_with_cli

A = FIXTURES_DIR / "transcripts" / "amp"
CLI = A / "T-019b9d03-62e3-772f-9780-3e637f90eaec.json"
VSCODE = A / "T-38c593cf-0e0f-4570-ad73-dfc2c3b1d6c9.json"


def only(path: Path, drop_thinking: bool = False):
    _, [session] = read_transcript(path, "auto", drop_thinking)
    return session


@pytest.mark.parametrize("path", [CLI, VSCODE], ids=lambda p: p.name)
def test_auto_detects_amp_threads(path: Path) -> None:
    assert detect_format(path) == "amp"


def test_roles_tool_runs_and_summary() -> None:
    s = only(CLI)
    assert s.id == CLI.stem
    assert [r["role"] for r in s.records] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "tool_result",
        "system",
        "assistant",
        "user",
        "assistant",
    ]
    assert s.records[1]["text"].startswith("Thinking: A fixed window resets")
    assert s.records[1]["text"].endswith(
        'Tool call Read: {"path":"/home/lee/src/gateway/limiter/window.go"}'
    )
    assert s.records[2]["source"]["tool"] == "Read"
    failed = s.records[5]
    assert failed["source"]["is_error"] is True and failed["source"]["status"] == "error"
    assert "undefined: Bucket" in failed["text"]
    assert s.records[6]["text"].startswith("Lee asked to replace the fixed-window limiter")
    # the run the user rejected has no output: counted, not invented
    assert dict(s.skipped) == {"tool result without output": 1}
    info = s.records[0]["source"]["session"]
    assert info["title"] == "Port the rate limiter to a token bucket"
    assert info["model"] == "claude-sonnet-4-5-20250929"
    assert_results_follow_calls(s)
    assert dict(only(CLI, drop_thinking=True).skipped)["thinking"] == 1


def test_older_thread_image_and_list_result() -> None:
    s = only(VSCODE)
    assert s.records[0]["text"].endswith("[image: image/png, 192 bytes base64]")
    assert s.records[2]["text"].startswith('["mkdocs.yml:41:')
    assert "workspace" in s.records[0]["source"]["session"]


def test_chunk_cli_auto_and_by_name(tmp_path: Path) -> None:
    for fmt in ("auto", "amp"):
        err, files = chunk_with_cli(tmp_path, fmt, CLI, VSCODE)
        assert f"{CLI}: amp, 1 session(s)" in err
        assert sorted(p.stem for p in files) == sorted([CLI.stem, VSCODE.stem])
