"""grumem.transcripts and `grumem chunk`: each format's mapping, detection, errors, the CLI.

The samples under fixtures/transcripts/ were written for these tests in the
shape of each tool's real files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grumem.cli import TRANSCRIPT_FORMATS
from grumem.errors import RecordError, UnknownFormatError
from grumem.transcripts import FORMATS, detect_format, read_transcript, sanitize_session_id
from support.transcripts import (
    CLAUDE,
    MINI,
    MINI2,
    OPENAI,
    OPENAI_OBJ,
    RECORDS,
    SID,
    SWE,
    SWE0,
    SWE_STEPS,
    sessions_of,
)


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


def test_cli_format_choices_and_the_config_schema_are_the_registry() -> None:
    """The format names are kept in three places: the registry, the CLI's list (its
    help, built without importing every format) and the config schema's enum (which
    Snakemake validates against): one list, each name once."""
    from grumem.io.jsonl import schema

    project = schema("config")["properties"]["projects"]["additionalProperties"]
    enum = project["properties"]["transcripts"]["properties"]["format"]["enum"]
    for names in (TRANSCRIPT_FORMATS, enum):
        assert names[0] == "auto" and len(set(names)) == len(names)
        assert sorted(names[1:]) == sorted(FORMATS)


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


def test_the_docs_list_every_format_with_a_valid_config_example() -> None:
    """docs/transcripts.md's table has a row per format and its config example validates
    and names every format: a new format cannot ship undocumented."""
    import yaml

    from grumem.config.settings import validate_config
    from support.checkout import REPO_ROOT

    readme = (REPO_ROOT / "docs" / "transcripts.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The formats") :]
    section = section[: section.index("\n## ", 1)]
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z-]+)` \|", section, re.M)}
    assert rows == set(FORMATS)
    example = readme[readme.index("One project per format") :]
    example = example[example.index("```yaml") + len("```yaml") : example.index("```\n\n")]
    config = yaml.safe_load(example)
    validate_config(config, "docs/transcripts.md")
    assert {p["transcripts"]["format"] for p in config["projects"].values()} == set(FORMATS)


@pytest.mark.parametrize("first", ["first_line", "document"])
def test_detection_parses_a_one_line_document_once(tmp_path: Path, first: str) -> None:
    """A JSON document written compactly is one line: its first line and its document
    are one parse, whichever a detector asks for first, or `--format auto` would hold
    two copies of a large transcript. A document over lines has its own first line."""
    from grumem.transcripts.base import Head

    doc = json.loads(OPENAI.read_text(encoding="utf-8"))
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(doc), encoding="utf-8")
    head = Head(compact)
    value = getattr(head, first)
    assert value == doc
    assert head.first_line is head.document is value

    spread = tmp_path / "spread.json"
    spread.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    head = Head(spread)
    assert getattr(head, first) == (doc if first == "document" else None)  # `[` alone
    assert head.document == doc and head.first_line is None

    scalar = tmp_path / "scalar.json"  # not a document: a first line all the same
    scalar.write_text('"just text"', encoding="utf-8")
    head = Head(scalar)
    assert getattr(head, first) == ("just text" if first == "first_line" else None)
    assert head.first_line == "just text" and head.document is None
