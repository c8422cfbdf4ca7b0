"""grumem.transcripts.formats.codex_cli: Codex CLI session rollouts in, records out.

The fixtures under fixtures/transcripts/codex-cli/ were written for these tests
in the shape of Codex CLI's `RolloutLine`s (no real user's log).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.errors import RecordError
from grumem.io.chunk_files import read_chunk_file
from grumem.transcripts import FORMATS, detect_format, read_transcript
from grumem.transcripts.base import Head, thinking_text, tool_call_text
from grumem.transcripts.formats import codex_cli
from support.checkout import FIXTURES_DIR
from support.transcripts import transcript_samples
from support.workflow import REPO, demo_project, files_under, snakemake, write_config

T = FIXTURES_DIR / "transcripts"
LONG_ID = "0199f2a4-7c1e-7d30-9b6a-2e5c41f0a8d7"
SHORT_ID = "0199f7d1-22ab-7e10-8c3d-5a9b0e4f6c21"
LONG = T / "codex-cli" / f"rollout-2025-11-03T09-14-02-{LONG_ID}.jsonl"
SHORT = T / "codex-cli" / f"rollout-2025-11-04T17-02-40-{SHORT_ID}.jsonl"
OTHERS = [p for p, fmt in transcript_samples() if fmt not in ("openhands", "codex-cli")]


def session_of(path: Path, drop_thinking: bool = False):
    fmt, sessions = read_transcript(path, "auto", drop_thinking)
    assert fmt == "codex-cli" and len(sessions) == 1
    return sessions[0]


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def write_rollout(path: Path, lines: list[dict]) -> Path:
    path.write_text(
        "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8"
    )
    return path


META = {"timestamp": "t", "type": "session_meta", "payload": {"id": "s-1", "cwd": "/w"}}


def item(payload: dict) -> dict:
    return {"timestamp": "t", "type": "response_item", "payload": payload}


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize("path", [LONG, SHORT], ids=lambda p: p.name)
def test_auto_detects_codex_rollouts(path: Path) -> None:
    assert detect_format(path) == "codex-cli"


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: p.name)
def test_codex_does_not_claim_other_formats_samples(path: Path) -> None:
    assert not codex_cli.detect(path, Head(path))
    assert detect_format(path) != "codex-cli"


def test_registered_after_the_existing_formats() -> None:
    assert FORMATS["codex-cli"] is codex_cli
    assert list(FORMATS).index("codex-cli") > list(FORMATS).index("records")


# ------------------------------------------------------------------ mapping


def test_long_rollout_mapping_duplicates_and_encrypted_reasoning() -> None:
    s = session_of(LONG)
    assert s.id == LONG_ID  # from session_meta, not the file name
    raw = lines_of(LONG)
    joined = "\n".join(r["text"] for r in s.records)
    # harness context injected as user messages is system; the typed request is the user's
    assert [r["role"] for r in s.records[:3]] == ["system", "system", "user"]
    assert s.records[0]["text"].startswith("# AGENTS.md instructions")
    assert s.records[2]["text"].startswith("The tile cache keeps growing")
    # event_msg repeats user and agent text: each appears once
    for line in raw:
        p = line["payload"]
        if line["type"] == "event_msg" and p["type"] in ("user_message", "agent_message"):
            assert joined.count(p["message"]) == 1
    # encrypted reasoning is never rendered, not even as a placeholder
    for line in raw:
        enc = line["payload"].get("encrypted_content")
        if enc:
            assert enc not in joined and enc[:20] not in joined
    assert "encrypted" not in joined
    assert s.skipped["encrypted reasoning"] == 4
    # every call is followed by its output, paired by call_id and named
    results = [r for r in s.records if r["role"] == "tool_result"]
    outputs = [x["payload"] for x in raw if x["payload"].get("type", "").endswith("_output")]
    assert [r["text"] for r in results] == [p["output"] for p in outputs]
    assert {r["source"]["tool"] for r in results} == {"shell", "apply_patch"}
    patch = next(r for r in s.records if r["text"].startswith("Tool call apply_patch: "))
    assert "*** Begin Patch\n*** Update File: cache/evict.go\n" in patch["text"]  # as written
    compacted = next(r for r in s.records if r["source"].get("type") == "compacted")
    assert compacted["role"] == "system" and compacted["text"].startswith("Summary of the work")
    assert s.records[-1]["text"].startswith("The old tests wrote every tile")
    assert s.skipped["ghost_snapshot"] == 1 and s.skipped["turn_context"] == 3
    assert s.skipped["event_msg:token_count"] == 3


def test_reasoning_summaries_and_raw_content_are_thinking_kept_or_dropped() -> None:
    kept = session_of(LONG)
    thinking = [r["text"] for r in kept.records if r["text"].startswith("Thinking: ")]
    assert thinking[0] == (
        "Thinking: **Exploring eviction code**\n\n"
        "Thinking: I'll look for the eviction paths and the byte accounting first."
    )
    assert any("the condition uses && so" in t for t in thinking)  # raw reasoning content
    dropped = session_of(LONG, drop_thinking=True)
    assert not any(r["text"].startswith("Thinking: ") for r in dropped.records)
    assert dropped.skipped["thinking"] == len(thinking)
    assert len(dropped.records) == len(kept.records) - len(thinking)


def test_short_rollout_image_web_search_and_encrypted_only_reasoning() -> None:
    s = session_of(SHORT)
    assert s.id == SHORT_ID
    assert [r["role"] for r in s.records] == ["system", "user", "assistant", "assistant"]
    assert s.records[1]["text"].endswith("\n\n[image: image/png, 104 bytes base64]")
    assert s.records[2]["text"].startswith('Tool call web_search: {"type":"search"')
    assert s.skipped["encrypted reasoning"] == 1 and "empty reasoning" not in s.skipped


def test_without_session_meta_the_file_names_the_session(tmp_path: Path) -> None:
    f = write_rollout(
        tmp_path / "rollout-x.jsonl",
        [
            item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                }
            )
        ],
    )
    _, [s] = read_transcript(f, "codex-cli")
    assert s.id == "rollout-x" and s.records[0]["text"] == "hi"


# ------------------------------------------------------------------ losslessness

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="§"), max_size=40
)


@st.composite
def rollouts(draw):
    """(lines, expected (role, text) kept and under drop_thinking, tags, thinking tags, secrets).

    Every text carries a unique tag `§n§`, so "exactly once" is countable."""
    counter = iter(range(10**6))
    tags: list[str] = []
    think_tags: list[str] = []

    def text(thinking: bool = False) -> str:
        n = next(counter)
        (think_tags if thinking else tags).append(f"§{n}§")
        return f"§{n}§{draw(_TEXT)}"

    lines = [{"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}}]
    kept: list[tuple[str, str]] = []
    dropped: list[tuple[str, str]] = []
    secrets: list[str] = []

    def both(role: str, t: str) -> None:
        kept.append((role, t))
        dropped.append((role, t))

    def event(payload: dict) -> None:
        lines.append({"timestamp": "t", "type": "event_msg", "payload": payload})

    steps = st.sampled_from(
        ["user", "context", "agent", "reason", "call", "custom", "noise", "comp"]
    )
    for step in draw(st.lists(steps, max_size=12)):
        if step == "user":
            parts = [text() for _ in range(draw(st.integers(1, 2)))]
            content = [{"type": "input_text", "text": p} for p in parts]
            lines.append(item({"type": "message", "role": "user", "content": content}))
            event({"type": "user_message", "message": "\n".join(parts)})
            both("user", "\n\n".join(parts))
        elif step == "context":
            t = "<environment_context>" + text()
            content = [{"type": "input_text", "text": t}]
            lines.append(item({"type": "message", "role": "user", "content": content}))
            both("system", t)
        elif step == "agent":
            t = text()
            content = [{"type": "output_text", "text": t}]
            lines.append(item({"type": "message", "role": "assistant", "content": content}))
            event({"type": "agent_message", "message": t})
            both("assistant", t)
        elif step == "reason":
            summary = [text(thinking=True) for _ in range(draw(st.integers(0, 2)))]
            secret = f"gAAAA{len(secrets)}SECRET{draw(_TEXT)}"
            secrets.append(secret)
            payload = {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": t} for t in summary],
                "content": None,
                "encrypted_content": secret,
            }
            for t in summary:
                event({"type": "agent_reasoning", "text": t})
            lines.append(item(payload))
            if summary:
                kept.append(("assistant", "\n\n".join(thinking_text(t) for t in summary)))
        elif step == "call":
            cid = f"call_{len(lines)}"
            command = ["bash", "-lc", text()]
            args = json.dumps({"command": command})
            lines.append(
                item({"type": "function_call", "name": "shell", "arguments": args, "call_id": cid})
            )
            both("assistant", tool_call_text("shell", {"command": command}))
            output = text()
            event({"type": "exec_command_end", "call_id": cid, "aggregated_output": output})
            lines.append(item({"type": "function_call_output", "call_id": cid, "output": output}))
            both("tool_result", output)
        elif step == "custom":
            cid = f"call_{len(lines)}"
            body, output = text(), text()
            lines.append(
                item(
                    {
                        "type": "custom_tool_call",
                        "name": "apply_patch",
                        "input": body,
                        "call_id": cid,
                    }
                )
            )
            lines.append(
                item({"type": "custom_tool_call_output", "call_id": cid, "output": output})
            )
            both("assistant", f"Tool call apply_patch: {body}")
            both("tool_result", output)
        elif step == "comp":
            t = text()
            lines.append({"timestamp": "t", "type": "compacted", "payload": {"message": t}})
            both("system", t)
        else:
            lines.append({"timestamp": "t", "type": "turn_context", "payload": {"model": "m"}})
            event({"type": "token_count", "info": None})
    return lines, kept, dropped, tags, think_tags, secrets


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollout=rollouts(), drop_thinking=st.booleans())
def test_every_text_appears_once_in_order(tmp_path_factory, rollout, drop_thinking) -> None:
    lines, kept, dropped, tags, think_tags, secrets = rollout
    f = write_rollout(tmp_path_factory.mktemp("codex") / "rollout.jsonl", lines)
    _, [s] = read_transcript(f, "codex-cli", drop_thinking)
    got = [(r["role"], r["text"]) for r in s.records]
    expected = dropped if drop_thinking else kept
    assert got == expected
    joined = "\n".join(t for _, t in got)
    for tag in tags:
        assert joined.count(tag) == 1, tag
    for tag in think_tags:
        assert joined.count(tag) == (0 if drop_thinking else 1), tag
    for secret in secrets:
        assert secret not in joined


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("line", "field", "why"),
    [
        ({"timestamp": "t", "payload": {}}, "type", "missing"),
        ({"timestamp": "t", "type": "response_item", "payload": "x"}, "payload", "expected dict"),
        (item({"role": "user", "content": []}), "payload.type", "missing"),
        (item({"type": "message", "role": "robot", "content": []}), "payload.role", "unknown role"),
        (
            item({"type": "message", "role": "user", "content": [{"type": "audio"}]}),
            "payload.content[0].type",
            "unknown content part 'audio'",
        ),
        (
            item({"type": "function_call", "name": "shell", "arguments": "{}"}),
            "payload.call_id",
            "missing",
        ),
        (item({"type": "function_call_output", "call_id": "c"}), "payload.output", "missing"),
        (
            item({"type": "function_call_output", "call_id": "c", "output": 3}),
            "payload.output",
            "expected a string",
        ),
        (
            item({"type": "reasoning", "summary": [{"type": "summary_text"}]}),
            "payload.summary[0].text",
            "missing",
        ),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, line: dict, field: str, why: str
) -> None:
    f = write_rollout(tmp_path / "bad.jsonl", [META, line])
    with pytest.raises(RecordError) as e:
        read_transcript(f, "codex-cli")
    assert (e.value.path, e.value.line, e.value.field) == (str(f), 2, field)
    assert why in str(e.value) and f"{f}:2:" in str(e.value)


def test_cli_bad_line_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    f = tmp_path / "rollout.jsonl"
    f.write_text(json.dumps(META) + "\n{not json\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--out", str(tmp_path / "out"), str(f)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{f}:2:" in proc.stderr


# ------------------------------------------------------------------ chunking and the workflow


def test_cli_long_rollout_needs_several_chunks(tmp_path: Path) -> None:
    out = tmp_path / "chunks"
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--out", str(out), str(LONG), str(SHORT)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"{LONG}: codex-cli, 1 session(s)" in proc.stdout + proc.stderr
    assert len(read_chunk_file(out / f"{LONG_ID}.jsonl")) >= 3
    assert len(read_chunk_file(out / f"{SHORT_ID}.jsonl")) == 1


def test_codex_project_chunks_then_prompts(tmp_path: Path, fake_server) -> None:
    server = fake_server(REPO / "fixtures" / "fake" / "demo.yaml")
    project = demo_project(
        transcripts={"glob": str(T / "codex-cli" / "rollout-*.jsonl"), "format": "codex-cli"}
    )
    del project["chunks"]
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, server.base_url, projects={"cx": project}, shard_rule="sorted")
    snakemake(tmp_path, "results/cx/prompts/s000.jsonl")
    chunk_files = [
        p.name for p in files_under(tmp_path / "results/cx/chunks") if p.suffix == ".jsonl"
    ]
    assert sorted(chunk_files) == sorted([f"{LONG_ID}.jsonl", f"{SHORT_ID}.jsonl"])
    prompts = (tmp_path / "results/cx/prompts/s000.jsonl").read_text(encoding="utf-8")
    assert "The tile cache keeps growing" in prompts and "nginx 502 page" in prompts
