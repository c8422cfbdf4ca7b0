"""The aider chat history reader (grumem.transcripts.formats.aider): detection, mapping,
losslessness over random histories written the way aider writes them, bad input,
and a project of aider histories through `chunk -> prompts`.

The fixtures under fixtures/transcripts/aider/ were written for these tests in the
shape aider 0.86's aider/io.py appends to `.aider.chat.history.md`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from support.checkout import FIXTURES_DIR
from support.workflow import REPO, demo_project, files_under, read_lines, snakemake, write_config

A = FIXTURES_DIR / "transcripts" / "aider"
LONG = A / "invoice-cli.aider.chat.history.md"
SHORT = A / "retry-backoff.aider.chat.history.md"
TAG = "thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b"


def sessions_of(path: Path, drop_thinking: bool = False) -> dict:
    _, sessions = read_transcript(path, "auto", drop_thinking)
    return {s.id: s for s in sessions}


# ------------------------------------------------------------------ aider's writer
# The calls of aider/io.py that append to the chat history, as the property test's
# ground truth: user_input, ai_output, _tool_message/tool_output, the session header.


def write_user(inp: str) -> str:
    hist = "  \n#### ".join(inp.splitlines() if inp else ["<blank>"])
    return f"\n#### {hist}".rstrip() + "  \n"


def write_ai(content: str) -> str:
    return "\n" + content.strip() + "\n\n"


def write_tool(message: str) -> str:
    return "".join(("> " + line.strip()).rstrip() + "  \n" for line in message.splitlines())


def write_header(ts: str = "2026-01-02 03:04:05") -> str:
    return f"\n# aider chat started at {ts}\n\n"


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize("path", [LONG, SHORT], ids=lambda p: p.name.split(".")[0])
def test_auto_detects_aider_histories(path: Path) -> None:
    assert detect_format(path) == "aider"
    assert read_transcript(path)[0] == "aider"


def test_markdown_that_is_not_an_aider_history_is_not_detected(tmp_path: Path) -> None:
    f = tmp_path / "notes.md"
    f.write_text("# Notes\n\n#### a heading\n> a quote\n")
    with pytest.raises(Exception, match="not a transcript format grumem knows"):
        detect_format(f)


# ------------------------------------------------------------------ mapping


def test_sessions_one_per_header_named_after_the_project() -> None:
    s = sessions_of(LONG)
    assert list(s) == ["invoice-cli-1", "invoice-cli-2", "invoice-cli-3"]
    assert list(sessions_of(SHORT)) == ["retry-backoff-1"]
    assert [r["role"] for r in s["invoice-cli-1"].records] == [
        "tool_result",
        "user",
        "assistant",
        "tool_result",
        "user",
        "tool_result",
        "user",
        "assistant",
        "tool_result",
    ]


def test_user_lines_joined_and_hard_breaks_removed() -> None:
    main = sessions_of(LONG)["invoice-cli-2"]
    users = [r for r in main.records if r["role"] == "user"]
    assert users[1]["text"] == (
        "The CSV export must use the same rounding as the totals.\n"
        "Also the header row should be:\n\nnumber,customer,net,tax,gross\n\n"
        "and amounts must have exactly two decimals."
    )
    assert users[1]["source"] == {"file": str(LONG), "line": 78}
    short = sessions_of(SHORT)["retry-backoff-1"]
    assert [r["text"] for r in short.records if r["role"] == "user"][1] == "<blank>"


def test_tool_output_runs_are_one_record_and_blank_output_lines_kept() -> None:
    first = sessions_of(LONG)["invoice-cli-1"].records
    assert first[0]["text"].startswith("/home/dev/.local/bin/aider --model")
    assert first[0]["text"].endswith("Added src/invoice/totals.py to the chat.")
    assert first[5]["text"] == (
        "/run pytest -q tests/test_totals.py\nF.....\n\n"
        "FAILED tests/test_totals.py::test_empty_cart - NameError: name 'CENT' is not defined\n"
        "1 failed, 5 passed in 0.41s\n"
        "Add 0.3k tokens of command output to the chat? (Y)es/(N)o [Yes]: y\n"
        "Added 5 lines of output to the chat."
    )
    assert not any(r["text"].endswith(" ") for r in first)


def test_thinking_blocks_kept_or_dropped() -> None:
    kept = sessions_of(LONG)["invoice-cli-1"].records[2]
    assert kept["role"] == "assistant"
    assert kept["text"].startswith(
        "Thinking: Summing floats and rounding at the end can differ from rounding each line."
    )
    assert "\n\n`line_total` multiplies" in kept["text"]
    assert TAG not in "".join(r["text"] for s in sessions_of(LONG).values() for r in s.records)
    dropped = sessions_of(LONG, drop_thinking=True)
    assert dropped["invoice-cli-1"].records[2]["text"].startswith("`line_total` multiplies")
    assert dict(dropped["invoice-cli-2"].skipped) == {"thinking": 2}
    assert not any("Thinking: " in r["text"] for s in dropped.values() for r in s.records)


def test_empty_sessions_left_out_and_counted(tmp_path: Path) -> None:
    f = tmp_path / ".aider.chat.history.md"
    f.write_text(
        write_header() + write_header() + write_user("hi") + write_ai("Hello.") + write_header()
    )
    s = read_transcript(f)[1]
    assert [x.id for x in s] == [f"{tmp_path.name}-2"]
    assert dict(s[0].skipped) == {"empty session": 2}
    assert [r["text"] for r in s[0].records] == ["hi", "Hello."]


def test_crlf_line_endings(tmp_path: Path) -> None:
    f = tmp_path / "win.md"
    doc = write_header() + write_user("a\nb") + write_ai("ok") + write_tool("done")
    f.write_bytes(doc.replace("\n", "\r\n").encode())
    [s] = read_transcript(f)[1]
    assert [(r["role"], r["text"]) for r in s.records] == [
        ("user", "a\nb"),
        ("assistant", "ok"),
        ("tool_result", "done"),
    ]


# ------------------------------------------------------------------ lossless (property)

_CHAR = st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))
_line = st.text(_CHAR, max_size=30)


def _free(line: str) -> bool:
    """An answer line aider's prefixes would misread (the documented ambiguity)."""
    return not (
        line.startswith(("#### ", "> ", "# aider chat started at ")) or line in ("####", ">")
    )


user_text = (
    st.lists(_line, min_size=1, max_size=5)
    .map("\n".join)
    .filter(lambda t: t.splitlines() == t.split("\n") and t.split("\n")[-1].strip() != "")
    .map(lambda t: t.rstrip())
)
tool_text = (
    st.lists(_line.map(str.strip), min_size=1, max_size=5)
    .map("\n".join)
    .filter(lambda t: t.strip() != "" and t.splitlines() == t.split("\n"))
)
_answer_line = _line.filter(_free)
answer_text = (
    st.lists(_answer_line, min_size=1, max_size=6)
    .map("\n".join)
    .filter(lambda t: t.strip() != "" and t.splitlines() == t.split("\n"))
    .map(str.strip)
    .filter(lambda t: all(_free(x) for x in t.split("\n")))
)
message = st.one_of(
    st.tuples(st.just("user"), user_text),
    st.tuples(st.just("tool_result"), tool_text),
    st.tuples(st.just("assistant"), answer_text),
    st.tuples(st.just("thinking"), st.tuples(answer_text, answer_text)),
)


def _no_answer_next_to_thinking(session: list) -> list:
    """Two answers in a row are one run of lines; around a thinking block the reader
    separates the pieces by one blank line, so a thinking answer right after (or
    before) another answer would not round-trip as two texts: keep them apart."""
    out: list = []
    for m in session:
        if (
            out
            and {m[0], out[-1][0]} <= {"assistant", "thinking"}
            and "thinking"
            in (
                m[0],
                out[-1][0],
            )
        ):
            continue
        out.append(m)
    return out


history = st.lists(
    st.lists(message, max_size=8).map(_no_answer_next_to_thinking), min_size=1, max_size=4
)


def render(doc: list[list[tuple[str, object]]]) -> str:
    out = []
    for session in doc:
        out.append(write_header())
        for kind, text in session:
            if kind == "user":
                out.append(write_user(text))
            elif kind == "tool_result":
                out.append(write_tool(text))
            elif kind == "assistant":
                out.append(write_ai(text))
            else:
                thought, answer = text
                out.append(write_ai(f"<{TAG}>\n\n{thought}\n\n</{TAG}>\n\n{answer}"))
    return "".join(out)


def expected(doc: list[list[tuple[str, object]]], drop_thinking: bool) -> list[list[tuple]]:
    """(role, text) per session: consecutive tool messages and consecutive answers
    are one run in the file, so one record."""
    sessions = []
    for session in doc:
        recs: list[list] = []
        for kind, text in session:
            if kind == "thinking":
                thought, answer = text
                kind, text = "assistant", answer
                if not drop_thinking:
                    text = f"Thinking: {thought}\n\n{answer}"
            if recs and kind == recs[-1][0] == "tool_result":
                recs[-1][1] += "\n" + text
            elif recs and kind == recs[-1][0] == "assistant":
                recs[-1][1] += "\n\n\n" + text
            else:
                recs.append([kind, text])
        if recs:
            sessions.append([tuple(r) for r in recs])
    return sessions


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=history, drop_thinking=st.booleans())
def test_every_text_once_in_order(tmp_path_factory, doc, drop_thinking: bool) -> None:
    f = tmp_path_factory.mktemp("aider") / ".aider.chat.history.md"
    f.write_text(render(doc), encoding="utf-8")
    want = expected(doc, drop_thinking)
    fmt, got = read_transcript(f, "auto", drop_thinking)
    assert fmt == "aider"
    assert [[(r["role"], r["text"]) for r in s.records] for s in got] == want
    n_thinking = sum(kind == "thinking" for s in doc for kind, _ in s)
    assert sum(s.skipped["thinking"] for s in got) == (n_thinking if drop_thinking else 0)


# ------------------------------------------------------------------ bad input


def test_text_before_the_first_header_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "h.md"
    f.write_text("\nstray notes\n" + write_header() + write_user("hi"))
    with pytest.raises(RecordError) as e:
        read_transcript(f, "aider")
    assert (e.value.path, e.value.line) == (str(f), 2)
    assert "before the first '# aider chat started at' line" in str(e.value)


def test_not_utf8_is_an_error_naming_the_byte(tmp_path: Path) -> None:
    f = tmp_path / "h.md"
    f.write_bytes(write_header().encode() + b"#### caf\xe9  \n")
    with pytest.raises(RecordError) as e:
        read_transcript(f, "aider")
    assert (e.value.path, e.value.line) == (str(f), 4) and "not UTF-8" in e.value.why


# ------------------------------------------------------------------ workflow


def test_aider_project_chunks_then_prompts(tmp_path, fake_server) -> None:
    server = fake_server(REPO / "fixtures" / "fake" / "demo.yaml")
    project = demo_project(transcripts={"glob": str(A / "invoice-cli.*.md")})
    del project["chunks"]
    write_config(tmp_path, server.base_url, projects={"ai": project})
    dry = snakemake(tmp_path, "-n", "results/ai/log.jsonl").stdout
    assert "rule chunk:" in dry and "rule prompts:" in dry
    snakemake(tmp_path, "results/ai/log.jsonl")
    chunk_files = [p for p in files_under(tmp_path / "results/ai/chunks") if p.suffix == ".jsonl"]
    assert sorted(p.stem for p in chunk_files) == [
        "invoice-cli-1",
        "invoice-cli-2",
        "invoice-cli-3",
    ]
    sessions = {x["session"] for x in read_lines(tmp_path / "results/ai/log.jsonl")}
    assert sessions == {p.stem for p in chunk_files}
    long = [p for p in chunk_files if p.stem == "invoice-cli-2"][0]
    assert len(read_lines(long)) >= 2  # several chunks at the default section budget
