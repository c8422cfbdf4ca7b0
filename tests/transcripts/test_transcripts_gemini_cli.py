"""The Gemini CLI saved-chat reader (grumem.transcripts.formats.gemini_cli): detection,
mapping, losslessness over random conversation records, bad input, and a project
of Gemini CLI sessions through `chunk -> prompts`.

The fixtures under fixtures/transcripts/gemini-cli/ were written for these tests in
the shape of the ConversationRecord that gemini-cli's ChatRecordingService saves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from grumem.transcripts.base import tool_call_text
from support.checkout import FIXTURES_DIR
from support.workflow import REPO, demo_project, files_under, read_lines, snakemake, write_config

G = FIXTURES_DIR / "transcripts" / "gemini-cli"
LONG = G / "session-2026-05-06T14-02-9d3f5a2e.json"
SHORT = G / "session-2026-06-01T08-00-c4a1e8b0.json"
LOG = G / "session-2026-09-14T10-05-e7b2d4a9.jsonl"
LOG_ID = "e7b2d4a9-3c18-4f60-a2d5-91c0b8e6f3a4"
LONG_ID = "9d3f5a2e-61b4-4c0e-8f7a-2b6d1c9e4a70"
SHORT_ID = "c4a1e8b0-2f7d-4a63-b915-0e8d6f3a2c17"


def session_of(path: Path, drop_thinking: bool = False):
    _, [session] = read_transcript(path, "auto", drop_thinking)
    return session


def roles(session) -> list[str]:
    return [r["role"] for r in session.records]


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize("path", [LONG, SHORT, LOG], ids=lambda p: p.name)
def test_auto_detects_gemini_cli_sessions(path: Path) -> None:
    assert detect_format(path) == "gemini-cli"
    assert read_transcript(path)[0] == "gemini-cli"


# ------------------------------------------------------------------ mapping


def test_roles_thoughts_tool_calls_and_cli_notices() -> None:
    s = session_of(LONG)
    assert s.id == LONG_ID
    assert roles(s)[:10] == [
        "user",
        "assistant",  # thought + text + read_file + run_shell_command
        "tool_result",
        "tool_result",
        "assistant",
        "user",
        "system",  # info: Request cancelled.
        "user",
        "assistant",  # a call with no text
        "tool_result",
    ]
    first = s.records[1]
    assert first["text"] == (
        "Thinking: Locating the failure: The job stopped uploading, so either the script exits "
        "early or the upload command fails silently. I need the script and the log.\n\n"
        "I'll start by reading the backup script and its last log.\n\n"
        'Tool call read_file: {"absolute_path":"/srv/nas/scripts/backup.sh"}\n\n'
        'Tool call run_shell_command: {"command":"tail -n 20 /var/log/backup.log",'
        '"description":"Show the end of the backup log"}'
    )
    assert first["source"]["tool_call_ids"] == [
        "read_file-1770000001-a1",
        "run_shell_command-1770000002-b2",
    ]
    assert s.records[2]["text"].startswith("#!/bin/sh\nset -u\n")
    assert {k: s.records[3]["source"][k] for k in ("tool", "tool_call_id", "status")} == {
        "tool": "run_shell_command",
        "tool_call_id": "run_shell_command-1770000002-b2",
        "status": "success",
    }
    notices = [(r["source"]["type"], r["text"]) for r in s.records if r["role"] == "system"]
    assert [t for t, _ in notices] == ["info", "warning", "error"]
    assert notices[0][1] == "Request cancelled."
    assert s.records[8]["text"].startswith("Tool call run_shell_command: ")
    assert s.records[9]["source"]["status"] == "error"
    assert dict(s.skipped) == {}


def test_parts_content_thought_parts_inline_data_and_calls_without_result() -> None:
    s = session_of(SHORT)
    assert s.id == SHORT_ID
    assert roles(s) == ["user", "assistant", "tool_result", "assistant"]
    assert s.records[0]["text"] == (
        "Why does this chart show a dip on Sunday?\n\n[inline data: image/png, 600 bytes base64]"
    )
    assert s.records[1]["text"].startswith("Thinking: The query buckets by UTC day")
    assert s.records[2]["source"]["tool_call_id"] == "read_file-1771000002-f2"
    assert s.records[2]["text"].startswith("SELECT date_trunc('day', ts)")
    assert dict(s.skipped) == {"tool call without result": 1}
    assert "iVBORw0KGgo" not in json.dumps([r["text"] for r in s.records])


def test_thinking_dropped_and_counted() -> None:
    s = session_of(LONG, drop_thinking=True)
    assert not any("Thinking: " in r["text"] for r in s.records)
    assert s.records[1]["text"].startswith("I'll start by reading the backup script")
    assert dict(s.skipped) == {"thinking": 13}
    short = session_of(SHORT, drop_thinking=True)
    assert short.records[1]["text"].startswith("The dashboard groups events by UTC day.")
    assert dict(short.skipped) == {"thinking": 1, "tool call without result": 1}


def test_jsonl_log_replayed_as_gemini_cli_resumes_it() -> None:
    s = session_of(LOG)
    assert s.id == LOG_ID
    assert roles(s) == ["user", "assistant", "tool_result", "assistant", "user", "assistant"]
    # the call was written pending, then again complete under the same id: read once, complete
    assert [r["source"]["id"] for r in s.records if r["role"] != "tool_result"] == [
        "u-0001",
        "g-0002",
        "g-0003",
        "u-0005",
        "g-0006",
    ]
    assert s.records[2]["text"].startswith('Found 3 matches for pattern "\\btimeout\\b"')
    assert s.records[2]["source"]["status"] == "success"
    # the prompt the user took back with /rewind is gone, and counted
    assert "Wait, also rename it in the docs." not in [r["text"] for r in s.records]
    assert dict(s.skipped) == {"rewound message": 1}


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    lines = LOG.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[4])
    del bad["toolCalls"][0]["name"]
    lines[4] = json.dumps(bad)
    f = tmp_path / "session-bad.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "gemini-cli")
    assert (e.value.path, e.value.line, e.value.field) == (str(f), 5, "toolCalls[0].name")
    lines[6] = '{"hello": 1}'
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "gemini-cli")
    assert e.value.line == 7 and "expected session metadata, a message" in e.value.why


def test_tool_results_follow_their_calls() -> None:
    for path in (LONG, SHORT, LOG):
        s = session_of(path)
        called: dict[str, int] = {}
        for i, r in enumerate(s.records):
            for cid in r["source"].get("tool_call_ids", []):
                called[cid] = i
            if r["role"] == "tool_result":
                assert called[r["source"]["tool_call_id"]] < i


# ------------------------------------------------------------------ lossless (property)

text = st.text(min_size=1, max_size=40)
args = st.dictionaries(
    st.text(max_size=8), st.one_of(st.text(max_size=10), st.integers()), max_size=3
)
tool_call = st.fixed_dictionaries(
    {
        "id": st.uuids().map(str),
        "name": st.sampled_from(["read_file", "run_shell_command", "replace", "glob"]),
        "args": args,
        "output": st.text(max_size=40),
        "as_parts": st.booleans(),
    }
)
content = st.one_of(text, st.lists(text, min_size=1, max_size=3))
thought = st.tuples(text, text)
message = st.one_of(
    st.fixed_dictionaries({"type": st.just("user"), "content": content}),
    st.fixed_dictionaries({"type": st.sampled_from(["info", "warning", "error"]), "content": text}),
    st.fixed_dictionaries(
        {
            "type": st.just("gemini"),
            "content": st.one_of(st.just(""), content),
            "thoughts": st.lists(thought, max_size=2),
            "toolCalls": st.lists(tool_call, max_size=3),
        }
    ),
)


def build(messages: list[dict]) -> dict:
    out = []
    for i, m in enumerate(messages):
        rec = {"id": f"m{i}", "timestamp": "2026-01-01T00:00:00.000Z", "type": m["type"]}
        c = m["content"]
        rec["content"] = [{"text": x} for x in c] if isinstance(c, list) else c
        if m["type"] == "gemini":
            rec["thoughts"] = [
                {"subject": a, "description": b, "timestamp": "2026-01-01T00:00:00.000Z"}
                for a, b in m["thoughts"]
            ]
            rec["toolCalls"] = [
                {
                    "id": t["id"],
                    "name": t["name"],
                    "args": t["args"],
                    "result": (
                        [
                            {
                                "functionResponse": {
                                    "id": t["id"],
                                    "name": t["name"],
                                    "response": {"output": t["output"]},
                                }
                            }
                        ]  # fmt: skip
                        if t["as_parts"]
                        else t["output"] or None
                    ),
                    "resultDisplay": t["output"],
                    "status": "success",
                    "timestamp": "2026-01-01T00:00:00.000Z",
                }
                for t in m["toolCalls"]
            ]
            rec["model"] = "gemini-2.5-pro"
        out.append(rec)
    return {
        "sessionId": "s-1",
        "projectHash": "ab" * 32,
        "startTime": "2026-01-01T00:00:00.000Z",
        "lastUpdated": "2026-01-01T00:00:00.000Z",
        "messages": out,
    }


def expected(messages: list[dict], drop_thinking: bool) -> list[tuple[str, str]]:
    role = {"user": "user", "gemini": "assistant", "info": "system", "warning": "system"}
    recs = []
    for m in messages:
        c = m["content"]
        parts = list(c) if isinstance(c, list) else ([c] if c else [])
        if m["type"] != "gemini":
            recs.append((role.get(m["type"], "system"), "\n\n".join(parts)))
            continue
        thoughts = [] if drop_thinking else [f"Thinking: {a}: {b}" for a, b in m["thoughts"]]
        calls = [tool_call_text(t["name"], t["args"]) for t in m["toolCalls"]]
        if thoughts + parts + calls:
            recs.append(("assistant", "\n\n".join(thoughts + parts + calls)))
        # a result given as a plain string that is empty was null: the display text stands in
        recs.extend(("tool_result", t["output"]) for t in m["toolCalls"])
    return recs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(message, min_size=1, max_size=8),
    drop_thinking=st.booleans(),
    as_log=st.booleans(),
)
def test_every_text_once_in_order(
    tmp_path_factory, messages, drop_thinking: bool, as_log: bool
) -> None:
    doc = build(messages)
    if as_log:  # the JSON Lines log: each gemini message written twice, pending then complete
        f = tmp_path_factory.mktemp("gemini") / "session.jsonl"
        lines = [{k: v for k, v in doc.items() if k != "messages"}]
        for m in doc["messages"]:
            if m["type"] == "gemini":
                lines.append({**m, "toolCalls": [], "content": ""})
            lines.append(m)
            lines.append({"$set": {"lastUpdated": m["timestamp"]}})
        f.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    else:
        f = tmp_path_factory.mktemp("gemini") / "session.json"
        f.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    fmt, [s] = read_transcript(f, "auto", drop_thinking)
    assert fmt == "gemini-cli"
    assert [(r["role"], r["text"]) for r in s.records] == expected(messages, drop_thinking)
    n_thoughts = sum(len(m.get("thoughts", [])) for m in messages)
    assert s.skipped["thinking"] == (n_thoughts if drop_thinking else 0)


# ------------------------------------------------------------------ bad input


def _broken(tmp_path: Path, change) -> Path:
    doc = json.loads(SHORT.read_text(encoding="utf-8"))
    change(doc)
    f = tmp_path / "session-broken.json"
    f.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return f


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        (
            lambda d: d["messages"][1].update(type="robot"),
            "messages[1].type",
            "unknown type 'robot'",
        ),
        (lambda d: d["messages"][2].pop("content"), "messages[2].content", "missing"),
        (
            lambda d: d["messages"][1]["toolCalls"][1].pop("name"),
            "messages[1].toolCalls[1].name",
            "missing",
        ),  # fmt: skip
        (
            lambda d: d["messages"][0]["content"].append({"video": 1}),
            "messages[0].content[2]",
            "unknown part",
        ),  # fmt: skip
        (
            lambda d: d["messages"][1].update(thoughts=[{"subject": 3, "description": "x"}]),
            "messages[1].thoughts[0].subject",
            "expected str",
        ),  # fmt: skip
        (lambda d: d.update(messages={}), "messages", "expected list"),
    ],
    ids=["type", "content", "call-name", "part", "thought", "messages"],
)
def test_bad_input_names_file_and_json_path(tmp_path: Path, change, field, why) -> None:
    f = _broken(tmp_path, change)
    with pytest.raises(RecordError) as e:
        read_transcript(f, "gemini-cli")
    assert (e.value.path, e.value.field) == (str(f), field)
    assert why in e.value.why


def test_bad_json_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "session-x.json"
    f.write_text('{"sessionId": "a", "projectHash": "b",\n "messages": [,]}\n')
    with pytest.raises(RecordError) as e:
        read_transcript(f, "gemini-cli")
    assert e.value.line == 2 and "bad JSON" in e.value.why


# ------------------------------------------------------------------ workflow


def test_gemini_cli_project_chunks_then_prompts(tmp_path, fake_server) -> None:
    server = fake_server(REPO / "fixtures" / "fake" / "demo.yaml")
    project = demo_project(transcripts={"glob": str(G / "session-*.json*"), "format": "auto"})
    del project["chunks"]
    write_config(tmp_path, server.base_url, projects={"gem": project})
    dry = snakemake(tmp_path, "-n", "results/gem/log.jsonl").stdout
    assert "rule chunk:" in dry and "rule prompts:" in dry
    snakemake(tmp_path, "results/gem/log.jsonl")
    chunk_files = [p for p in files_under(tmp_path / "results/gem/chunks") if p.suffix == ".jsonl"]
    assert sorted(p.stem for p in chunk_files) == sorted([LONG_ID, SHORT_ID, LOG_ID])
    sessions = {x["session"] for x in read_lines(tmp_path / "results/gem/log.jsonl")}
    assert sessions == {LONG_ID, SHORT_ID, LOG_ID}
    long = next(p for p in chunk_files if p.stem == LONG_ID)
    assert len(read_lines(long)) >= 2  # several chunks at the default section budget
