"""grumem.transcripts.formats.openhands: OpenHands event streams in, records out.

The fixtures under fixtures/transcripts/openhands/ were written for these tests
in the shape OpenHands' `event_to_dict` gives its events (no real user's log).
"""

from __future__ import annotations

import json
import shutil
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
from grumem.transcripts.formats import openhands
from support.checkout import FIXTURES_DIR
from support.transcripts import transcript_samples
from support.workflow import REPO, demo_project, files_under, snakemake, write_config

T = FIXTURES_DIR / "transcripts"
LONG = T / "openhands" / "ledgerkit-issue-212.json"
SHORT = T / "openhands" / "sales-plot.json"
OTHERS = [p for p, fmt in transcript_samples() if fmt not in ("openhands", "codex-cli")]


def session_of(path: Path, drop_thinking: bool = False):
    fmt, sessions = read_transcript(path, "auto", drop_thinking)
    assert fmt == "openhands" and len(sessions) == 1
    return sessions[0]


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize("path", [LONG, SHORT], ids=lambda p: p.name)
def test_auto_detects_openhands_event_streams(path: Path) -> None:
    assert detect_format(path) == "openhands"


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: p.name)
def test_openhands_does_not_claim_other_formats_samples(path: Path) -> None:
    assert not openhands.detect(path, Head(path))
    assert detect_format(path) != "openhands"


def test_registered_last_so_earlier_detectors_keep_their_files() -> None:
    assert FORMATS["openhands"] is openhands
    assert list(FORMATS).index("openhands") > list(FORMATS).index("openai")


# ------------------------------------------------------------------ mapping


def test_short_session_roles_images_errors_and_bookkeeping() -> None:
    s = session_of(SHORT)
    assert [r["role"] for r in s.records] == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    user = s.records[1]["text"]
    assert user.startswith("What does this plot show?")
    assert user.endswith("\n\n[image: image/png, 96 bytes base64]")  # never the base64 itself
    ipython = s.records[2]
    assert ipython["text"].startswith("I'll load the CSV behind the plot to check the numbers.\n\n")
    assert "Tool call execute_ipython_cell: " in ipython["text"]
    assert "include_extra" not in ipython["text"] and "kernel_init_code" not in ipython["text"]
    assert s.records[5]["source"]["observation"] == "error"
    assert s.records[5]["text"].startswith("ls: cannot access")
    assert s.skipped == {
        "observation:agent_state_changed": 2,
        "observation:null": 1,
        "empty message": 1,
    }


def test_thought_once_model_response_never_and_observations_pair_with_actions() -> None:
    s = session_of(LONG)
    doc = json.loads(LONG.read_text(encoding="utf-8"))
    joined = "\n".join(r["text"] for r in s.records)
    # the two-call response: its thought is on the first action only, and shown once
    thought = "Blank rows are already skipped by `if row:`."
    assert joined.count(thought) == 1
    # model_response bodies (ids, usage) never reach a record
    assert "chatcmpl-" not in joined and "prompt_tokens" not in joined
    # every observation's content is one tool_result naming the action it answers
    observations = [
        (i, e)
        for i, e in enumerate(doc)
        if "observation" in e and e["observation"] not in ("agent_state_changed", "recall")
    ]
    results = [r for r in s.records if r["role"] == "tool_result"]
    assert [r["text"] for r in results] == [e["content"] for _, e in observations]
    for r, (i, e) in zip(results, observations, strict=True):
        assert r["source"]["index"] == i and r["source"]["cause"] == e["cause"]
        assert r["source"]["tool_call_id"] == e["tool_call_metadata"]["tool_call_id"]
    # the edit shows its old and new text once each (not again from the observation's extras)
    edit = next(r for r in s.records if r["source"].get("action") == "edit")
    assert "str_replace" in edit["text"] and "csv.reader(io.StringIO(text" in edit["text"]
    finish = s.records[-1]
    assert finish["source"]["action"] == "finish" and "Fixed issue #212" in finish["text"]
    assert s.skipped == {
        "action:recall": 1,
        "observation:recall": 1,
        "observation:agent_state_changed": 4,
        "action:change_agent_state": 1,
    }
    users = [r["text"] for r in s.records if r["role"] == "user"]
    assert len(users) == 2 and users[1].startswith("Skip them, like before.")


def test_user_terminal_commands_and_reasoning_content(tmp_path: Path) -> None:
    doc = [
        {
            "id": 0,
            "source": "user",
            "action": "run",
            "args": {"command": "git status", "thought": "", "blocking": False},
        },
        {"id": 1, "source": "agent", "cause": 0, "observation": "run", "content": "clean"},
        {
            "id": 2,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls", "thought": "Look.", "reasoning_content": "hmm, ls first"},
        },
    ]
    f = tmp_path / "events.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    s = session_of(f)
    assert [(r["role"], r["text"]) for r in s.records] == [
        ("user", 'Tool call run: {"command":"git status"}'),
        ("tool_result", "clean"),
        ("assistant", 'Thinking: hmm, ls first\n\nLook.\n\nTool call run: {"command":"ls"}'),
    ]
    dropped = session_of(f, drop_thinking=True)
    assert dropped.records[2]["text"] == 'Look.\n\nTool call run: {"command":"ls"}'
    assert dropped.skipped["thinking"] == 1


# ------------------------------------------------------------------ losslessness

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="§"), max_size=40
)


@st.composite
def event_streams(draw):
    """(events, expected records as (role, text)) for a random valid OpenHands stream.

    Every text carries a unique tag `§n§`, so "exactly once" is countable."""
    counter = iter(range(10**6))

    def text() -> str:
        return f"§{next(counter)}§{draw(_TEXT)}"

    events: list[dict] = []
    expected: list[tuple[str, str]] = []
    tags: list[str] = []

    def add(ev: dict) -> int:
        events.append({"id": len(events), "timestamp": "2025-04-01T10:00:00", **ev})
        return len(events) - 1

    def tagged(t: str) -> str:
        tags.append(t[: t.index("§", 1) + 1])
        return t

    steps = draw(
        st.lists(
            st.sampled_from(["user", "agent", "system", "calls", "noise", "empty"]), max_size=12
        )
    )
    for step in steps:
        if step in ("user", "agent"):
            t = tagged(text())
            add({"source": step, "message": "m", "action": "message", "args": {"content": t}})
            expected.append(("user" if step == "user" else "assistant", t))
        elif step == "system":
            t = tagged(text())
            add({"source": "agent", "action": "system", "args": {"content": t, "tools": []}})
            expected.append(("system", t))
        elif step == "noise":
            kind = draw(st.sampled_from(["state", "change", "recall"]))
            if kind == "state":
                add(
                    {
                        "source": "environment",
                        "observation": "agent_state_changed",
                        "content": "",
                        "extras": {"agent_state": "running"},
                    }
                )
            elif kind == "change":
                add({"source": "agent", "action": "change_agent_state", "args": {"thought": ""}})
            else:
                r = add({"source": "user", "action": "recall", "args": {"query": "q"}})
                add({"source": "environment", "observation": "recall", "content": "", "cause": r})
        elif step == "empty":
            add({"source": "user", "action": "message", "args": {"content": ""}})
        else:  # one model response with one to three tool calls
            thought = tagged(text()) if draw(st.booleans()) else ""
            calls = [(tagged(text()), tagged(text())) for _ in range(draw(st.integers(1, 3)))]
            response = {
                "id": "chatcmpl-x",
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": thought,  # repeated here: must not be rendered again
                            "tool_calls": [
                                {
                                    "id": f"call_{k}",
                                    "function": {
                                        "name": "execute_bash",
                                        "arguments": json.dumps({"command": c}),
                                    },
                                }
                                for k, (c, _) in enumerate(calls)
                            ],
                        }
                    }
                ],
            }
            ids = []
            for k, (command, _) in enumerate(calls):
                meta = {
                    "function_name": "execute_bash",
                    "tool_call_id": f"call_{len(events)}_{k}",
                    "model_response": response,
                    "total_calls_in_response": len(calls),
                }
                args = {"command": command, "thought": thought if k == 0 else "", "blocking": False}
                ids.append(
                    (
                        add(
                            {
                                "source": "agent",
                                "action": "run",
                                "args": args,
                                "tool_call_metadata": meta,
                            }
                        ),
                        meta,
                    )
                )
                call = tool_call_text("execute_bash", {"command": command})
                shown = f"{thought}\n\n{call}" if k == 0 and thought else call
                expected.append(("assistant", shown))
            for (cause, meta), (_, output) in zip(ids, calls, strict=True):
                add(
                    {
                        "source": "environment",
                        "cause": cause,
                        "observation": "run",
                        "content": output,
                        "extras": {"command": "c", "metadata": {"exit_code": 0}},
                        "tool_call_metadata": meta,
                    }
                )
                expected.append(("tool_result", output))
    return events, expected, tags


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=event_streams())
def test_every_text_appears_once_in_order(tmp_path_factory, stream) -> None:
    events, expected, tags = stream
    f = tmp_path_factory.mktemp("oh") / "stream.json"
    f.write_text(json.dumps(events, ensure_ascii=False), encoding="utf-8")
    _, sessions = read_transcript(f, "openhands")
    got = [(r["role"], r["text"]) for r in sessions[0].records]
    assert got == expected
    joined = "\n".join(t for _, t in got)
    for tag in tags:  # commands appear JSON-escaped inside their call; tags need no escaping
        assert joined.count(tag) == 1, tag
    for role, t in expected:
        if role != "assistant":
            assert t in joined
        else:
            assert dumps(t)[1:-1] in dumps(joined)[1:-1]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("doc", "field", "why"),
    [
        ([1], "[0]", "expected an event object"),
        ([{"action": "run", "args": {}}], "[0].source", "missing"),
        ([{"source": "robot", "action": "run", "args": {}}], "[0].source", "unknown source"),
        ([{"source": "user", "message": "hi"}], "[0].action", "neither action nor observation"),
        ([{"source": "agent", "action": "run", "args": "ls"}], "[0].args", "expected dict"),
        (
            [{"source": "user", "action": "message", "args": {"content": 3}}],
            "[0].args.content",
            "expected str",
        ),
        (
            [{"source": "agent", "observation": "run", "content": ["x"]}],
            "[0].content",
            "expected a string",
        ),
        (
            [
                {"source": "agent", "action": "message", "args": {"content": "ok"}},
                {
                    "source": "agent",
                    "action": "run",
                    "args": {"command": "ls"},
                    "tool_call_metadata": {"tool_call_id": "c1"},
                },
            ],
            "[1].tool_call_metadata.function_name",
            "missing",
        ),
    ],
)
def test_bad_events_name_file_json_path_and_field(
    tmp_path: Path, doc: list, field: str, why: str
) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "openhands")
    assert e.value.path == str(f) and e.value.field == field
    assert why in str(e.value) and str(f) in str(e.value)


def test_bad_json_names_the_line_and_an_object_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "cut.json"
    f.write_text('[\n{"source": "user",\n "action": "message",\n', encoding="utf-8")
    with pytest.raises(RecordError, match=r"cut\.json:4: bad JSON"):
        read_transcript(f, "openhands")
    g = tmp_path / "obj.json"
    g.write_text('{"events": []}', encoding="utf-8")
    with pytest.raises(RecordError, match="expected a JSON array of OpenHands events"):
        read_transcript(g, "openhands")


def test_cli_bad_event_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps([{"source": "robot", "action": "run", "args": {}}]), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--out", str(tmp_path / "out"), str(f)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{f}: field '[0].source' unknown source 'robot'" in proc.stderr


# ------------------------------------------------------------------ chunking and the workflow


def test_cli_long_session_needs_several_chunks(tmp_path: Path) -> None:
    out = tmp_path / "chunks"
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--out", str(out), str(LONG), str(SHORT)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"{LONG}: openhands, 1 session(s)" in proc.stdout + proc.stderr
    long_chunks = read_chunk_file(out / "ledgerkit-issue-212.jsonl")
    assert len(long_chunks) >= 3
    assert len(read_chunk_file(out / "sales-plot.jsonl")) == 1


def test_openhands_project_chunks_then_prompts(tmp_path: Path, fake_server) -> None:
    server = fake_server(REPO / "fixtures" / "fake" / "demo.yaml")
    project = demo_project(transcripts={"glob": str(T / "openhands" / "*.json"), "format": "auto"})
    del project["chunks"]
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, server.base_url, projects={"oh": project}, shard_rule="sorted")
    snakemake(tmp_path, "results/oh/prompts/s000.jsonl")
    chunk_files = [
        p.name for p in files_under(tmp_path / "results/oh/chunks") if p.suffix == ".jsonl"
    ]
    assert sorted(chunk_files) == ["ledgerkit-issue-212.jsonl", "sales-plot.jsonl"]
    prompts = (tmp_path / "results/oh/prompts/s000.jsonl").read_text(encoding="utf-8")
    assert "quoted newline" in prompts and "Monthly sales rose steadily" in prompts


def test_auto_on_a_folder_mixing_all_formats(tmp_path: Path) -> None:
    """Every sample under fixtures/transcripts/<format>/, copied into one folder (each
    at its path there, beside the files of its store), chunks as <format> in one
    `--format auto` run: a new detector that steals another format's file fails here,
    and so does a format without a sample."""
    samples = transcript_samples()
    assert {fmt for _, fmt in samples} == set(FORMATS)  # all of them
    mixed = tmp_path / "mixed"
    shutil.copytree(T, mixed)
    expected = {mixed / p.relative_to(T): fmt for p, fmt in samples}
    files = sorted(expected)
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--format", "auto"]
        + ["--out", str(tmp_path / "out"), *map(str, files)],
        capture_output=True,
        text=True,
        check=True,
    )
    detected = {
        Path(line.split(": ")[0]): line.split(": ")[1].split(",")[0]
        for line in (proc.stdout + proc.stderr).splitlines()
        if not line.startswith(" ") and ": " in line
    }
    assert detected == expected
