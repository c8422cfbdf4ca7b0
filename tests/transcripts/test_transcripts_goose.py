"""grumem.transcripts.formats.goose: Goose's sessions.db (schema versions 5 and 9) and
the session JSONL files before 1.10.

The fixtures under fixtures/transcripts/goose/ are built by
scripts/write_sqlite_transcript_fixtures.py from the schemas SOURCES.md names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from grumem.transcripts.base import Head
from grumem.transcripts.formats import goose
from support.checkout import FIXTURES_DIR
from support.transcripts import chunk_cli, other_samples

G = FIXTURES_DIR / "transcripts" / "goose"
V9 = G / "sessions.db"
V5 = G / "goose-1.10" / "sessions.db"
JSONL = G / "20250612_103000.jsonl"
ALL = [V9, V5, JSONL]


def sessions(path: Path, fmt: str = "auto", drop_thinking: bool = False) -> dict:
    found, read = read_transcript(path, fmt, drop_thinking)
    assert found == "goose"
    return {s.id: s for s in read}


def roles(session) -> list[str]:
    return [r["role"] for r in session.records]


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(G)))
def test_auto_and_by_name(path: Path) -> None:
    assert detect_format(path) == "goose"
    assert sessions(path, "goose").keys() == sessions(path).keys()


@pytest.mark.parametrize("path", other_samples("goose"), ids=lambda p: p.name)
def test_refuses_other_formats_samples(path: Path) -> None:
    assert not goose.detect(path, Head(path))


CONVERSATION = [
    "user",
    "assistant",  # thinking, text, view call
    "tool_result",
    "assistant",  # text, edit call
    "tool_result",
    "assistant",  # build call
    "tool_result",  # permission denied
    "assistant",  # the answer; the UI-only notification is not a record
]


def test_schema_9_sessions_models_and_a_subagent() -> None:
    s = sessions(V9)
    assert list(s) == ["20260201_3", "20260201_4"]
    main = s["20260201_3"]
    assert roles(main) == CONVERSATION
    assert main.records[1]["text"] == (
        "Thinking: Probably COPY . . before pip install invalidates the cache on every change."
        "\n\nLet me read the Dockerfile.\n\n"
        'Tool call developer__text_editor: {"command":"view","path":"/srv/app/Dockerfile"}'
    )
    result = main.records[2]
    assert result["text"].startswith("FROM python:3.12-slim\nWORKDIR /app\nCOPY . .")
    assert (result["source"]["call_id"], result["source"]["tool"]) == (
        "toolu_g1",
        "developer__text_editor",
    )
    assert main.records[6]["source"]["is_error"] is True  # CallToolResult.isError
    assert dict(main.skipped) == {"systemNotification": 1, "redactedThinking": 1}
    first = main.records[0]["source"]
    assert (first["title"], first["provider"], first["model"]) == (
        "Docker layer cache",
        "anthropic",
        "claude-sonnet-4-5",
    )
    assert first["working_dir"] == "/srv/app" and first["time"] == 1762502400
    sub = s["20260201_4"]
    assert sub.records[0]["source"]["session_type"] == "sub_agent"
    assert roles(sub) == ["user", "assistant", "tool_result", "assistant"]


def test_schema_5_of_goose_1_10_and_older_tool_results() -> None:
    (s,) = sessions(V5).values()
    assert s.id == "20251020_1" and roles(s) == CONVERSATION
    # the older bare list of contents carries no isError: the failed build is plain
    assert "is_error" not in s.records[6]["source"]
    assert "model" not in s.records[0]["source"]  # schema 5 keeps no model


def test_jsonl_before_1_10() -> None:
    (s,) = sessions(JSONL).values()
    assert s.id == "20250612_103000"
    assert roles(s) == ["user", "assistant", "tool_result", "assistant"]
    assert s.records[2]["text"] == "44:    offset = (page - 1) * size - 1"
    assert s.records[3]["text"].endswith("\n\n[image: image/png, 88 bytes base64]")
    assert [r["source"]["line"] for r in s.records] == [2, 3, 4, 5]
    assert s.records[0]["source"]["title"] == "Pagination off by one"


def test_thinking_dropped_and_counted() -> None:
    main = sessions(V9, drop_thinking=True)["20260201_3"]
    assert main.records[1]["text"].startswith("Let me read the Dockerfile.")
    assert main.skipped["thinking"] == 1


def test_unknown_content_is_counted_and_a_bad_result_named(tmp_path: Path) -> None:
    lines = JSONL.read_text(encoding="utf-8").splitlines()
    msg = json.loads(lines[1])
    msg["content"].append({"type": "hologram", "x": 1})
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join([lines[0], json.dumps(msg), *lines[2:]]) + "\n", encoding="utf-8")
    (s,) = sessions(f).values()
    assert s.skipped["content:hologram"] == 1
    bad = json.loads(lines[3])
    bad["content"][0]["toolResult"] = {"status": "maybe"}
    f.write_text("\n".join([*lines[:3], json.dumps(bad)]) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "goose")
    assert (e.value.line, e.value.field) == (4, "content[0].toolResult")


def test_chunk_cli_auto(tmp_path: Path) -> None:
    err = chunk_cli(tmp_path / "out", ALL)
    assert f"{V9}: goose, 2 session(s)" in err and f"{JSONL}: goose, 1 session(s)" in err
    assert len(list((tmp_path / "out").iterdir())) == 4
