"""The Cline 4 messages-file reader (grumem.transcripts.formats.cline), and that the
Cline 3 task layout stays the `anthropic` format's.

The fixtures under fixtures/transcripts/cline/ were written for these tests in the
layout of cline/cline's messages contract v1 (fixtures/transcripts/cline/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from support.checkout import FIXTURES_DIR
from support.transcripts import assert_results_follow_calls, chunk_with_cli

C = FIXTURES_DIR / "transcripts" / "cline"
ROOT = "1784094053271_p8pzo"
LEAD = C / f"{ROOT}.messages.json"  # in its own folder <root>/ on disk
SUB = C / "search.messages.json"  # beside it, in <root>/
APRIL = C / "1777000321904_k2mfa.messages.json"
CLINE3 = FIXTURES_DIR / "transcripts" / "anthropic" / "docs-ci-warning.json"


def only(path: Path, drop_thinking: bool = False):
    _, [session] = read_transcript(path, "auto", drop_thinking)
    return session


@pytest.mark.parametrize("path", [LEAD, SUB, APRIL], ids=lambda p: p.name)
def test_auto_detects_cline_messages_files(path: Path) -> None:
    assert detect_format(path) == "cline"


def test_cline_3_tasks_stay_anthropic() -> None:
    assert detect_format(CLINE3) == "anthropic"


def test_lead_session_roles_tools_and_files() -> None:
    s = only(LEAD)
    assert s.id == ROOT
    assert [r["role"] for r in s.records] == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert s.records[0]["text"].startswith("You are Cline, a software engineer")
    assert s.records[1]["text"].endswith(
        '[file: exporter/write.py]\ndef write_rows(path, rows):\n    with open(path, "w") as f:'
        "\n        w = csv.writer(f)\n        w.writerows(rows)\n"
    )
    call = s.records[2]
    assert call["text"].startswith("Thinking: csv.writer writes")
    assert 'Tool call spawn_agent: {"agent":"search"' in call["text"]
    assert call["source"]["model"] == "claude-sonnet-4-6"
    assert call["source"]["timestamp"] == 1786786881022
    assert s.records[6]["source"]["is_error"] is True
    assert s.records[0]["source"]["session"]["agent"] == "lead"
    assert_results_follow_calls(s)
    assert "Thinking" not in only(LEAD, drop_thinking=True).records[2]["text"]


def test_subagent_is_a_session_of_its_own() -> None:
    s = only(SUB)
    assert s.id == f"{ROOT}__search"
    assert s.records[0]["source"]["session"]["task_type"] == "subagent_task"
    assert s.records[-1]["text"].startswith("Two writers:")
    assert_results_follow_calls(s)


def test_april_layout_inline_image() -> None:
    s = only(APRIL)
    assert s.records[1]["text"].endswith("[image: image/png, 288 bytes base64]")
    assert s.records[2]["source"]["model"] == "gpt-5"


def test_other_versions_are_refused(tmp_path: Path) -> None:
    doc = json.loads(APRIL.read_text(encoding="utf-8"))
    doc["version"] = 2
    f = tmp_path / "x.messages.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "cline")
    assert e.value.field == "version"


def test_chunk_cli_auto_and_by_name(tmp_path: Path) -> None:
    for fmt in ("auto", "cline"):
        err, files = chunk_with_cli(tmp_path, fmt, LEAD, SUB, APRIL)
        assert f"{SUB}: cline, 1 session(s)" in err
        assert sorted(p.stem for p in files) == sorted(
            [ROOT, f"{ROOT}__search", "1777000321904_k2mfa"]
        )
