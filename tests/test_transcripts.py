"""grumem.transcripts and `grumem chunk`: each format's mapping, detection, errors, the CLI.

The samples under fixtures/transcripts/ were written for these tests in the
shape of each tool's real files.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grumem.chunk_files import read_chunk_file, render_records
from grumem.cli import TRANSCRIPT_FORMATS
from grumem.jsonl import RecordError
from grumem.paths import FIXTURES_DIR
from grumem.tokens import count_tokens
from grumem.transcripts import (
    FORMATS,
    UnknownFormatError,
    detect_format,
    read_transcript,
    sanitize_session_id,
)

T = FIXTURES_DIR / "transcripts"
CLAUDE = T / "claude-code" / "7f3c2a10-5b8e-4d2a-9c41-0e6b1d2f3a45.jsonl"
SID = "7f3c2a10-5b8e-4d2a-9c41-0e6b1d2f3a45"
MINI = T / "mini-swe-agent" / "django__django-11099.traj.json"
MINI2 = T / "mini-swe-agent" / "astropy__astropy-7746.traj.json"
SWE = T / "swe-agent" / "sympy__sympy-20590.traj"
SWE0 = T / "swe-agent" / "marshmallow-code__marshmallow-1867.traj"
SWE_STEPS = T / "swe-agent" / "trajectory-only.traj"
OPENAI = T / "openai" / "export-job.json"
OPENAI_OBJ = T / "openai" / "staging-port.json"
RECORDS = T / "records" / "pairing-notes.jsonl"
ALL = [CLAUDE, MINI, MINI2, SWE, SWE0, SWE_STEPS, OPENAI, OPENAI_OBJ, RECORDS]


def sessions_of(path: Path, fmt: str = "auto", drop_thinking: bool = False) -> dict:
    _, sessions = read_transcript(path, fmt, drop_thinking)
    return {s.id: s for s in sessions}


def roles(session) -> list[str]:
    return [r["role"] for r in session.records]


def texts(session) -> list[str]:
    return [r["text"] for r in session.records]


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        (CLAUDE, "claude-code"),
        (MINI, "mini-swe-agent"),
        (MINI2, "mini-swe-agent"),
        (SWE, "swe-agent"),
        (SWE0, "swe-agent"),
        (SWE_STEPS, "swe-agent"),
        (OPENAI, "openai"),
        (OPENAI_OBJ, "openai"),
        (RECORDS, "records"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)
def test_auto_detects_each_sample(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt
    assert read_transcript(path)[0] == fmt


def test_unknown_format_lists_the_formats_tried(tmp_path: Path) -> None:
    for name, content in [
        ("notes.txt", "just some text\n"),
        ("cfg.json", '{"a": 1}\n'),
        ("empty.json", "[]\n"),
    ]:
        f = tmp_path / name
        f.write_text(content)
        with pytest.raises(UnknownFormatError) as e:
            read_transcript(f)
        assert str(f) in str(e.value)
        for fmt in FORMATS:
            assert fmt in str(e.value)


def test_cli_format_choices_are_the_registry() -> None:
    assert TRANSCRIPT_FORMATS[0] == "auto"
    assert sorted(TRANSCRIPT_FORMATS[1:]) == sorted(FORMATS)


def test_session_ids_are_safe_file_names() -> None:
    assert sanitize_session_id("proj/a b:c").startswith("proj_a_b_c-")
    assert sanitize_session_id(".hidden").startswith("_hidden-")
    assert sanitize_session_id("x.traj-1_2") == "x.traj-1_2"


def test_session_ids_that_render_alike_stay_distinct() -> None:
    ids = ["会话", "会议", "__", "a b", "a:b", "a_b", "é", "è"]
    safe = [sanitize_session_id(i) for i in ids]
    assert len(set(safe)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", s) and not s.startswith(".") for s in safe)


# ------------------------------------------------------------------ Claude Code


def test_claude_sidechains_become_their_own_sessions() -> None:
    s = sessions_of(CLAUDE)
    assert list(s) == [SID, f"{SID}-side-c0ffee01", f"{SID}-side-d00dfeed"]
    side1, side2 = s[f"{SID}-side-c0ffee01"], s[f"{SID}-side-d00dfeed"]
    assert roles(side1) == ["user", "assistant", "tool_result", "assistant"]
    assert texts(side1)[0].startswith("Find every call of datetime.now()")
    assert texts(side1)[2] == "src/tzparse/local.py:14:    now = datetime.now()"
    assert texts(side2)[3] == "The CI workflow sets TZ=America/New_York; laptops here run in UTC."
    main_text = "\n".join(texts(s[SID]))
    assert "Tool call Grep" not in main_text and "ci.yml" not in main_text


def test_claude_role_mapping_and_user_lines_of_tool_results_only() -> None:
    main = sessions_of(CLAUDE)[SID]
    assert roles(main) == [
        "user",
        "assistant",
        "tool_result",  # prompt; thinking+text+Bash (3 lines); result
        "assistant",
        "tool_result",
        "tool_result",  # text + 2 Task calls; both results
        "assistant",
        "tool_result",  # redacted thinking + Edit; error result
        "assistant",
        "tool_result",  # Read png; image result
        "user",
        "assistant",  # text + image; final answer
    ]
    # lines 7, 19, 20, 24, 26 carry only tool results: none of them is a user record
    assert [r["source"]["line"] for r in main.records if r["role"] == "user"] == [3, 28]


def test_claude_one_message_over_several_lines_is_one_record_in_order() -> None:
    main = sessions_of(CLAUDE)[SID]
    merged = [r for r in main.records if r["source"].get("message_id") == "msg_01AbCdEfGh"]
    assert len(merged) == 1
    assert merged[0]["source"]["line"] == 4
    assert merged[0]["text"] == (
        "Thinking: A test that passes locally and fails on CI often depends on the machine: "
        "timezone, locale, or file ordering. Run it first.\n\n"
        "I'll start by running the failing test.\n\n"
        'Tool call Bash: {"command":"TZ=America/New_York pytest tests/test_dates.py -x -q",'
        '"description":"Run the failing test under the CI timezone"}'
    )


def test_claude_tool_results_pair_with_their_calls() -> None:
    for session in sessions_of(CLAUDE).values():
        calls: dict[str, int] = {}
        for i, r in enumerate(session.records):
            for tool_id in r["source"].get("tool_use_ids", []):
                calls[tool_id] = i
            if r["role"] == "tool_result":
                tool_id = r["source"]["tool_use_id"]
                assert calls[tool_id] < i, f"{tool_id} answered before it was called"
                call_text = session.records[calls[tool_id]]["text"]
                assert f"Tool call {r['source']['tool']}: " in call_text
    main = sessions_of(CLAUDE)[SID]
    results = {r["source"]["tool_use_id"]: r for r in main.records if r["role"] == "tool_result"}
    assert results["toolu_02Search"]["text"] == (
        "One naive call: src/tzparse/local.py:14 uses datetime.now() without tz."
    )
    assert results["toolu_04Edit"]["source"]["is_error"] is True
    assert results["toolu_04Edit"]["text"].startswith("<tool_use_error>File has not been read")
    assert "is_error" not in results["toolu_01RunTest"]["source"]


def test_claude_placeholders_replace_base64_and_encrypted_blobs() -> None:
    main = sessions_of(CLAUDE)[SID]
    all_text = "\n".join(texts(main))
    assert "[image: image/png, 2000 bytes base64]" in all_text
    assert texts(main)[10] == (
        "Here is the CI log from yesterday, same failure:\n\n[image: image/jpeg, 1200 bytes base64]"
    )
    assert texts(main)[6].startswith(
        "[redacted thinking: encrypted, 320 bytes base64]\n\nTool call Edit: "
    )
    raw = [json.loads(line) for line in CLAUDE.read_text().splitlines()]
    blobs = [json.dumps(o) for o in raw]
    assert any(len(b) > 1000 for b in blobs)
    assert max(len(t) for t in texts(main)) < 700  # no blob made it into a record


def test_claude_thinking_kept_or_dropped_and_skips_counted() -> None:
    kept = sessions_of(CLAUDE)[SID]
    dropped = sessions_of(CLAUDE, drop_thinking=True)[SID]
    assert any(t.startswith("Thinking: ") for t in texts(kept))
    assert not any("Thinking: " in t or "redacted thinking" in t for t in texts(dropped))
    assert texts(dropped)[1].startswith("I'll start by running the failing test.")
    assert texts(dropped)[6].startswith("Tool call Edit: ")
    bookkeeping = {
        "summary": 1,
        "file-history-snapshot": 2,
        "system:notice": 1,
        "system:compact_boundary": 1,
    }
    assert dict(kept.skipped) == bookkeeping
    assert dict(dropped.skipped) == {**bookkeeping, "thinking": 1, "redacted_thinking": 1}


def test_claude_sources_point_back_to_lines() -> None:
    lines = CLAUDE.read_text().splitlines()
    for session in sessions_of(CLAUDE).values():
        for r in session.records:
            obj = json.loads(lines[r["source"]["line"] - 1])
            assert obj["type"] in ("user", "assistant")
            assert r["source"]["file"] == str(CLAUDE)


def test_claude_file_of_bookkeeping_only_has_no_sessions(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text('{"type":"summary","summary":"x","leafUuid":"u1"}\n')
    assert read_transcript(f) == ("claude-code", [])


# ------------------------------------------------------------------ mini-swe-agent


def test_mini_swe_agent_text_actions() -> None:
    s = sessions_of(MINI)["django__django-11099"]
    assert roles(s) == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "user",
    ]
    assert texts(s)[3].startswith("<returncode>0</returncode>\n<output>\n10:")
    assert '```bash\ngrep -n "regex" django/contrib/auth/validators.py\n```' in texts(s)[2]
    assert texts(s)[5].startswith("Please always provide EXACTLY ONE action")  # harness: user
    assert texts(s)[7].startswith("<returncode>0</returncode>")  # list-of-parts content
    assert [r["source"]["index"] for r in s.records] == list(range(10))


def test_mini_swe_agent_v2_tool_calls_and_exit() -> None:
    s = sessions_of(MINI2)["astropy__astropy-7746"]
    assert roles(s) == ["system", "user", "assistant", "tool_result", "assistant", "system"]
    assert texts(s)[2] == (
        "Let me reproduce it first.\n\nTool call bash: "
        '{"command":"python -c \'from astropy.wcs import WCS; WCS().wcs_pix2world([], [], 0)\'"}'
    )
    assert s.records[3]["source"]["tool_call_id"] == "call_7Yb1"
    assert s.records[3]["source"]["tool"] == "bash"
    assert texts(s)[5] == "diff --git a/setup.cfg b/setup.cfg\n"


# ------------------------------------------------------------------ SWE-agent


def test_swe_agent_tool_calls_and_demonstrations_skipped() -> None:
    s = sessions_of(SWE)["sympy__sympy-20590"]
    assert roles(s) == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
    ]
    assert dict(s.skipped) == {"demonstration": 1}
    assert "DEMONSTRATION" not in "\n".join(texts(s))
    assert texts(s)[2] == (
        "Symbol declares __slots__; a parent class may not.\n\n"
        'Tool call str_replace_editor: {"command":"view","path":"/testbed/sympy/core/symbol.py",'
        '"view_range":[182,202]}'
    )
    assert texts(s)[6].endswith("Tool call submit: {}")
    pairs = [
        (r["source"]["tool_call_id"], r["source"]["tool"])
        for r in s.records
        if r["role"] == "tool_result"
    ]
    assert pairs == [
        ("toolu_bdrk_01View", "str_replace_editor"),
        ("toolu_bdrk_02Grep", "bash"),
        ("toolu_bdrk_03Submit", "submit"),
    ]


def test_swe_agent_thought_action_observations_are_tool_results() -> None:
    s = sessions_of(SWE0)["marshmallow-code__marshmallow-1867"]
    assert roles(s) == ["system", "user", "assistant", "tool_result"]
    assert texts(s)[1].startswith("We're currently solving the following issue")
    assert texts(s)[3].startswith('Found 1 matches for "schema.py"')


def test_swe_agent_trajectory_steps_when_no_history() -> None:
    s = sessions_of(SWE_STEPS)["trajectory-only"]
    assert roles(s) == ["assistant", "tool_result", "assistant", "tool_result"]
    # no model response recorded: thought and action stand in for it
    assert texts(s)[0] == (
        "DISCUSSION\nThe rounding happens in TimeDelta._serialize.\n"
        "\n\nopen src/marshmallow/fields.py 1474\n"
    )
    assert texts(s)[2].startswith("DISCUSSION\nUse round() before int().\n```")
    assert texts(s)[3] == "File updated."


# ------------------------------------------------------------------ OpenAI chat


def test_openai_messages_tool_calls_reasoning_and_images() -> None:
    s = sessions_of(OPENAI)["export-job"]
    assert roles(s) == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert texts(s)[1] == (
        "The nightly export job writes an empty CSV since Tuesday. "
        "Here is the dashboard:\n\n[image: image/png, 800 bytes base64]"
    )
    assert texts(s)[2] == (
        "Thinking: An empty CSV with no error means the query returned no rows. Check the job's "
        "date filter and recent commits.\n\n"
        'Tool call read_file: {"path":"jobs/export.py"}\n\n'
        'Tool call run: {"cmd":"git log --since=tuesday --oneline -- jobs/"}'
    )
    assert s.records[2]["source"]["tool_call_ids"] == ["call_q1Lx0", "call_q2Mz1"]
    assert [
        (r["source"]["tool_call_id"], r["source"]["tool"])
        for r in s.records
        if r["role"] == "tool_result"
    ] == [("call_q1Lx0", "read_file"), ("call_q2Mz1", "run"), ("call_q3Na2", "apply_patch")]
    assert texts(s)[6] == ""  # an empty tool output is still the answer the agent saw

    dropped = sessions_of(OPENAI, drop_thinking=True)["export-job"]
    assert texts(dropped)[2].startswith('Tool call read_file: {"path":"jobs/export.py"}')
    assert dict(dropped.skipped) == {"thinking": 1}


def test_openai_object_with_messages_and_developer_role() -> None:
    s = sessions_of(OPENAI_OBJ)["staging-port"]
    assert roles(s) == ["system", "user", "assistant", "tool_result", "assistant"]
    assert texts(s)[2] == 'Tool call grep: {"pattern":"PORT","path":"deploy/staging.env"}'


# ------------------------------------------------------------------ records JSONL


def test_records_jsonl() -> None:
    s = sessions_of(RECORDS)["pairing-notes"]
    assert roles(s) == ["system", "user", "assistant", "tool_result"]
    assert texts(s)[2] == "The key includes the request id.\nDrop it from the key."
    assert [r["source"] for r in s.records] == [
        {"file": str(RECORDS), "line": i} for i in range(1, 5)
    ]


# ------------------------------------------------------------------ malformed input


def _claude_lines() -> list[str]:
    return CLAUDE.read_text().splitlines(keepends=True)


@pytest.mark.parametrize(
    ("mutate", "line", "field", "why"),
    [
        (lambda ls: ls[:2] + ['{"type": "user", \n'] + ls[3:], 3, None, "bad JSON"),
        (lambda ls: ls[:4] + ["\n"] + ls[5:], 5, None, "blank line"),
        (
            lambda ls: ls[:5] + [ls[5].replace('"message":', '"msg":')] + ls[6:],
            6,
            "message",
            "missing",
        ),
        (
            lambda ls: ls[:5] + [ls[5].replace('"type":"tool_use"', '"type":"hologram"')] + ls[6:],
            6,
            "message.content[0].type",
            "unknown content block 'hologram'",
        ),
        (
            lambda ls: ls[:6] + [ls[6].replace('"tool_use_id":', '"tool_id":')] + ls[7:],
            7,
            "message.content[0].tool_use_id",
            "missing",
        ),
    ],
    ids=["bad-json", "blank", "no-message", "unknown-block", "no-tool-use-id"],
)
def test_malformed_claude_code_names_file_line_and_why(
    tmp_path: Path, mutate, line: int, field: str | None, why: str
) -> None:
    f = tmp_path / "broken.jsonl"
    f.write_text("".join(mutate(_claude_lines())))
    with pytest.raises(RecordError) as e:
        read_transcript(f, "claude-code")
    assert (e.value.path, e.value.line, e.value.field) == (str(f), line, field)
    assert why in e.value.why
    assert f"{f}:{line}:" in str(e.value)


def test_malformed_records_and_json_documents(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text('{"role": "user", "text": "hi"}\n{"role": "robot", "text": "beep"}\n')
    with pytest.raises(RecordError) as e:
        read_transcript(f)
    assert (e.value.line, e.value.field) == (2, "role") and "robot" in e.value.why

    f = tmp_path / "chat.json"
    f.write_text('[{"role": "user", "content": "hi"},\n {"role": "wizard", "content": "x"}]\n')
    with pytest.raises(RecordError) as e:
        read_transcript(f, "openai")
    assert e.value.field == "[1].role" and "wizard" in e.value.why

    f.write_text('[{"role": "user", "content": "hi"},\n {"role": "assistant" "content": 1}]\n')
    with pytest.raises(RecordError) as e:
        read_transcript(f, "openai")
    assert e.value.line == 2 and "bad JSON" in e.value.why

    with pytest.raises(RecordError):  # a named format that does not fit fails, not crashes
        read_transcript(OPENAI, "claude-code")


# ------------------------------------------------------------------ the CLI


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_chunks_every_sample_within_budget_deterministically(tmp_path: Path) -> None:
    budget = 120
    a = run_cli("--budget", str(budget), "--out", str(tmp_path / "a"), *map(str, ALL))
    assert a.returncode == 0, a.stderr
    b = run_cli(
        "--format", "auto", "--budget", str(budget), "--out", str(tmp_path / "b"), *map(str, ALL)
    )
    assert b.returncode == 0, b.stderr
    assert a.stderr == b.stderr  # the statistics, in the job's log

    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(
        [
            f"{SID}.jsonl",
            f"{SID}-side-c0ffee01.jsonl",
            f"{SID}-side-d00dfeed.jsonl",
            "django__django-11099.jsonl",
            "astropy__astropy-7746.jsonl",
            "sympy__sympy-20590.jsonl",
            "marshmallow-code__marshmallow-1867.jsonl",
            "trajectory-only.jsonl",
            "export-job.jsonl",
            "staging-port.jsonl",
            "pairing-notes.jsonl",
        ]
    )
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
        chunks = read_chunk_file(tmp_path / "a" / name)  # schema, session, indices 0..n-1
        assert chunks[0].session == name.removesuffix(".jsonl")
        assert all(count_tokens(render_records(c.records)) <= budget for c in chunks)

    # the main Claude session: 12 records, one split in two parts, put back together exactly
    main = read_chunk_file(tmp_path / "a" / f"{SID}.jsonl")
    recs = [r for c in main for r in c.records]
    parts = [r for r in recs if "part" in r]
    assert [p["part"] for p in parts] == [{"index": 0, "of": 2}, {"index": 1, "of": 2}]
    original = next(
        r for r in sessions_of(CLAUDE)[SID].records if r["source"] == parts[0]["source"]
    )
    assert parts[0]["text"] + parts[1]["text"] == original["text"]

    line = next(ln for ln in a.stderr.splitlines() if ln.strip().startswith(f"{SID}:"))
    assert "records 12," in line and "parts split 1 (into 2 parts)" in line
    assert "file-history-snapshot 2" in line and "summary 1" in line
    assert "skipped: demonstration 1" in a.stderr


def test_cli_drop_thinking(tmp_path: Path) -> None:
    r = run_cli("--drop-thinking", "--out", str(tmp_path), str(CLAUDE), str(OPENAI))
    assert r.returncode == 0, r.stderr
    text = (tmp_path / f"{SID}.jsonl").read_text() + (tmp_path / "export-job.jsonl").read_text()
    assert "Thinking: " not in text and "redacted thinking" not in text
    assert "thinking 1" in r.stderr


def test_cli_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "text": "ok"}\n{"role": "user", "text": 5}\n')
    r = run_cli("--out", str(tmp_path / "out"), str(bad))
    assert r.returncode == 1
    assert f"{bad}:2: field 'text'" in r.stderr

    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    r = run_cli("--out", str(tmp_path / "out"), str(unknown))
    assert r.returncode == 1
    assert "tried claude-code, records, mini-swe-agent, swe-agent, openai" in r.stderr

    r = run_cli("--out", str(tmp_path / "out"), str(RECORDS), str(RECORDS))
    assert r.returncode == 1 and "also comes from" in r.stderr

    r = run_cli("--budget", "10", "--out", str(tmp_path / "out"), str(RECORDS))
    assert r.returncode == 1 and "at least 50" in r.stderr


# ------------------------------------------------------------------ bad input: one-line errors
# (issue 17, items 9 and 12)


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_cli_lone_surrogate_in_a_jsonl_transcript(tmp_path: Path) -> None:
    # an emoji cut between its UTF-16 halves, as JavaScript's substring leaves it
    bad = tmp_path / "cut.jsonl"
    bad.write_text('{"role": "user", "text": "ok"}\n{"role": "user", "text": "bye \\ud83d"}\n')
    err = one_line_error(run_cli("--format", "records", "--out", str(tmp_path / "o"), str(bad)))
    assert f"{bad}:2: field 'text' lone surrogate \\ud83d" in err
    claude = tmp_path / "claude.jsonl"
    lines = CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)
    n = next(i for i, x in enumerate(lines) if '"type":"user"' in x and '"content":"' in x)
    lines[n] = lines[n].replace('"content":"', '"content":"\\udc00', 1)
    claude.write_text("".join(lines), encoding="utf-8")
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(claude)))
    assert f"{claude}:{n + 1}: field 'message.content' lone surrogate \\udc00" in err
    assert not (tmp_path / "o").exists() or list((tmp_path / "o").iterdir()) == []


def test_cli_lone_surrogate_in_a_json_document(tmp_path: Path) -> None:
    doc = json.loads(OPENAI.read_text(encoding="utf-8"))
    bad = tmp_path / "openai.json"
    text = json.dumps(doc, indent=2).replace('"The nightly', '"\\ud83d The nightly', 1)
    bad.write_text(text, encoding="utf-8")
    line = text[: text.index("\\ud83d")].count("\n") + 1
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(bad)))
    assert f"{bad}:{line}: field '1.content.0.text' lone surrogate \\ud83d" in err


def test_cli_directory_and_missing_file(tmp_path: Path) -> None:
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(T / "records")))
    assert f"{T / 'records'}: is a directory" in err and "*.jsonl" in err
    missing = tmp_path / "missing.jsonl"
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(missing)))
    assert f"{missing}: cannot read: No such file or directory" in err
    err = one_line_error(run_cli("--format", "records", "--out", str(tmp_path / "o"), str(missing)))
    assert f"{missing}: cannot read" in err


@pytest.mark.parametrize("fmt", TRANSCRIPT_FORMATS)
def test_cli_empty_transcript_is_an_error_naming_it(tmp_path: Path, fmt: str) -> None:
    """An empty file read as zero sessions exited 0 and wrote nothing: the session
    would vanish from the project without a word."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    err = one_line_error(run_cli("--format", fmt, "--out", str(tmp_path / "o"), str(empty)))
    assert f"{empty}: empty file: no transcript to chunk" in err
