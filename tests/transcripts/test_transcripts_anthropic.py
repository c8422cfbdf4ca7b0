"""grumem.transcripts.formats.anthropic: Anthropic Messages histories (Cline, Roo Code) in.

The fixtures under fixtures/transcripts/anthropic/ were written for these tests
in the shape Cline and Roo Code save `api_conversation_history.json` (no real
user's log): invoice-pager-offset.json is a Cline task with its XML tool
protocol in text blocks, a pasted screenshot and environment details;
docs-ci-warning.json uses native tool_use/tool_result, thinking and a
redacted_thinking block, with Roo Code's `ts` on each message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps
from grumem.errors import RecordError
from grumem.io.chunk_files import read_chunk_file
from grumem.transcripts import FORMATS, detect_format, read_transcript
from grumem.transcripts.base import Head, tool_call_text
from grumem.transcripts.formats import anthropic
from support.checkout import FIXTURES_DIR
from support.transcripts import other_samples
from support.workflow import REPO, demo_project, files_under, snakemake, write_config

T = FIXTURES_DIR / "transcripts"
LONG = T / "anthropic" / "invoice-pager-offset.json"
SHORT = T / "anthropic" / "docs-ci-warning.json"
OTHERS = other_samples("anthropic")


def session_of(path: Path, drop_thinking: bool = False):
    fmt, sessions = read_transcript(path, "auto", drop_thinking)
    assert fmt == "anthropic" and len(sessions) == 1
    return sessions[0]


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize("path", [LONG, SHORT], ids=lambda p: p.name)
def test_auto_detects_anthropic_histories(path: Path) -> None:
    assert detect_format(path) == "anthropic"


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: p.name)
def test_anthropic_does_not_claim_other_formats_samples(path: Path) -> None:
    assert not anthropic.detect(path, Head(path))
    assert detect_format(path) != "anthropic"


def test_tried_before_openai_and_plain_text_chats_stay_openai(tmp_path: Path) -> None:
    assert list(FORMATS).index("anthropic") < list(FORMATS).index("openai")
    plain = tmp_path / "plain.json"
    plain.write_text(
        json.dumps(
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
            ]
        )
    )
    verdict = anthropic.detect(plain, Head(plain))
    assert not verdict and "plain chat" in verdict.reason
    assert detect_format(plain) == "openai"  # same records either way


# ------------------------------------------------------------------ mapping


def test_short_history_roles_tools_thinking_and_redacted_blocks() -> None:
    s = session_of(SHORT)
    assert [r["role"] for r in s.records] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "user",
        "assistant",
    ]
    first = s.records[1]["text"]
    assert first.startswith("Thinking: CI differences")
    assert first.endswith(tool_call_text("read_file", {"path": ".github/workflows/docs.yml"}))
    joined = "\n".join(r["text"] for r in s.records)
    assert "EmwKAhgBEgy3va3pzix" not in joined and "redacted" not in joined  # never rendered
    assert "EqQBCkYIBxgCKkD1" not in joined  # the thinking signature is not text
    assert s.skipped == {"redacted_thinking": 1}
    ok, failed = s.records[2], s.records[4]
    assert ok["source"]["tool"] == "read_file" and ok["source"]["tool_use_id"] == "toolu_01A9"
    assert ok["text"].startswith("jobs:\n  docs:")
    assert failed["source"]["is_error"] is True and failed["text"].startswith("Warning, treated")
    assert s.records[5]["text"] == "that's the one, fix it please"
    assert s.records[1]["source"]["tool_use_ids"] == ["toolu_01A9"]

    dropped = session_of(SHORT, drop_thinking=True)
    assert dropped.records[1]["text"].startswith("Let me compare")
    assert dropped.skipped == {"redacted_thinking": 1, "thinking": 1}


def test_cline_history_image_placeholder_and_text_blocks_in_order() -> None:
    s = session_of(LONG)
    doc = json.loads(LONG.read_text(encoding="utf-8"))
    task = s.records[0]["text"]
    assert task.startswith("<task>\nThe invoice list skips")
    assert "[image: image/png, 240 bytes base64]" in task
    assert doc[0]["content"][1]["source"]["data"] not in task  # never the base64 itself
    assert task.endswith("</environment_details>")
    # every message is one record: users' text blocks joined by blank lines, in order
    assert len(s.records) == len(doc)
    for r, m in zip(s.records[1:], doc[1:], strict=True):
        assert r["text"] == "\n\n".join(b["text"] for b in m["content"])
        assert r["role"] == m["role"]
    assert s.records[-1]["text"].startswith("<attempt_completion>")


def test_cline_file_name_makes_the_task_folder_the_session(tmp_path: Path) -> None:
    task = tmp_path / "1764752531000"
    task.mkdir()
    f = task / "api_conversation_history.json"
    f.write_bytes(SHORT.read_bytes())
    assert session_of(f).id == "1764752531000"
    assert session_of(SHORT).id == "docs-ci-warning"


# ------------------------------------------------------------------ losslessness

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="§"), max_size=30
)


@st.composite
def histories(draw):
    """(messages, expected (role, text) records, tags, dropped tags) for a random history.

    Every text carries a unique tag `§n§`; thinking is kept unless dropped, redacted
    thinking is never rendered (its tag must appear zero times)."""
    counter = iter(range(10**6))
    tags: list[str] = []

    def text() -> str:
        t = f"§{next(counter)}§{draw(_TEXT)}"
        tags.append(t[: t.index("§", 1) + 1])
        return t

    drop = draw(st.booleans())
    messages, expected, never = [], [], []
    for _ in range(draw(st.integers(1, 8))):
        # a user turn: a string, or text blocks and tool results mixed
        if draw(st.booleans()):
            t = text()
            messages.append({"role": "user", "content": t})
            expected.append(("user", t))
        else:
            blocks, pending = [], []
            for kind in draw(st.lists(st.sampled_from(["text", "result"]), min_size=1, max_size=4)):
                if kind == "text":
                    t = text()
                    blocks.append({"type": "text", "text": t})
                    pending.append(t)
                else:
                    if pending:
                        expected.append(("user", "\n\n".join(pending)))
                        pending = []
                    t = text()
                    content = t if draw(st.booleans()) else [{"type": "text", "text": t}]
                    blocks.append({"type": "tool_result", "tool_use_id": "t", "content": content})
                    expected.append(("tool_result", t))
            if pending:
                expected.append(("user", "\n\n".join(pending)))
            messages.append({"role": "user", "content": blocks})
        # an assistant turn of thinking, text and tool calls
        blocks, parts = [], []
        for kind in draw(
            st.lists(st.sampled_from(["text", "think", "redacted", "call"]), min_size=1, max_size=4)
        ):
            if kind == "text":
                t = text()
                blocks.append({"type": "text", "text": t})
                parts.append(t)
            elif kind == "think":
                t = text()
                blocks.append({"type": "thinking", "thinking": t, "signature": "sig"})
                if drop:
                    never.append(tags[-1])
                else:
                    parts.append(f"Thinking: {t}")
            elif kind == "redacted":
                t = text()
                blocks.append({"type": "redacted_thinking", "data": t})
                never.append(tags[-1])
            else:
                t = text()
                blocks.append({"type": "tool_use", "id": "t", "name": "run", "input": {"c": t}})
                parts.append(tool_call_text("run", {"c": t}))
        messages.append({"role": "assistant", "content": blocks})
        if parts:
            expected.append(("assistant", "\n\n".join(parts)))
    # one Anthropic-only block, so detection has something to go on
    messages.append({"role": "assistant", "content": [{"type": "thinking", "thinking": ""}]})
    return messages, expected, tags, never, drop


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=histories())
def test_every_text_appears_once_in_order(tmp_path_factory, h) -> None:
    messages, expected, tags, never, drop = h
    f = tmp_path_factory.mktemp("an") / "history.json"
    f.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
    fmt, sessions = read_transcript(f, "auto", drop)
    assert fmt == "anthropic"
    got = [(r["role"], r["text"]) for r in sessions[0].records]
    assert got == expected
    joined = dumps("\n".join(t for _, t in got))
    for tag in tags:  # tool inputs appear JSON-escaped; the tags need no escaping
        assert joined.count(tag) == (0 if tag in never else 1), tag


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("doc", "field", "why"),
    [
        ([1], "[0]", "expected a message object"),
        ([{"content": "x"}], "[0].role", "missing"),
        ([{"role": "system", "content": "x"}], "[0].role", "unknown role 'system'"),
        ([{"role": "user", "content": 3}], "[0].content", "expected str or list"),
        ([{"role": "user", "content": [{"text": "x"}]}], "[0].content[0].type", "missing"),
        (
            [{"role": "user", "content": [{"type": "video", "text": "x"}]}],
            "[0].content[0].type",
            "unknown content block 'video'",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "input": {}}]}],
            "[0].content[0].name",
            "missing",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "content": 5}],
                }
            ],
            "[0].content[0].content",
            "expected a string or a list of blocks",
        ),
        (
            [{"role": "user", "content": [{"type": "image", "source": {"type": "s3"}}]}],
            "[0].content[0].source.type",
            "unknown image source 's3'",
        ),
        ({"messages": [{"role": "user", "content": None}]}, "messages[0].content", "expected"),
    ],
)
def test_bad_messages_name_file_json_path_and_field(
    tmp_path: Path, doc: object, field: str, why: str
) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "anthropic")
    assert e.value.path == str(f) and e.value.field == field
    assert why in str(e.value) and str(f) in str(e.value)


def test_bad_json_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "cut.json"
    f.write_text('[\n{"role": "user",\n "content": [\n', encoding="utf-8")
    with pytest.raises(RecordError, match=r"cut\.json:4: bad JSON"):
        read_transcript(f, "anthropic")


# ------------------------------------------------------------------ chunking and the workflow


def test_cli_long_history_needs_several_chunks(tmp_path: Path) -> None:
    out = tmp_path / "chunks"
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--out", str(out), str(LONG), str(SHORT)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"{LONG}: anthropic, 1 session(s)" in proc.stdout + proc.stderr
    assert len(read_chunk_file(out / "invoice-pager-offset.jsonl")) >= 3
    assert len(read_chunk_file(out / "docs-ci-warning.jsonl")) == 1


def test_anthropic_project_chunks_then_prompts(tmp_path: Path, fake_server) -> None:
    server = fake_server(REPO / "fixtures" / "fake" / "demo.yaml")
    project = demo_project(transcripts={"glob": str(T / "anthropic" / "*.json"), "format": "auto"})
    del project["chunks"]
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, server.base_url, projects={"an": project}, shard_rule="sorted")
    snakemake(tmp_path, "results/an/prompts/s000.jsonl")
    chunk_files = [
        p.name for p in files_under(tmp_path / "results/an/chunks") if p.suffix == ".jsonl"
    ]
    assert sorted(chunk_files) == ["docs-ci-warning.jsonl", "invoice-pager-offset.jsonl"]
    prompts = (tmp_path / "results/an/prompts/s000.jsonl").read_text(encoding="utf-8")
    assert "duplicate object description" in prompts and "The invoice list skips" in prompts
