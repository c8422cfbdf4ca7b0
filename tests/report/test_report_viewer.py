"""The trajectory viewer (grumem.report.viewer, `grumem report-viewer`).

Its input is a real export: fixtures/export/ (card 004's log: an unparsed
turn, an early, a late and an on-time exit, an abort after two turns, one
aborted before its first answer; hand count in its README) run through
grumem's export, with HTML put into one section and one think text first.
The page is read back two ways: its JSON records parsed from the file, and
the page as headless Chromium (Debian's, driven by Playwright) shows it.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.cli import build_parser, main
from grumem.core.chunk_text import render_records
from grumem.core.json_text import dumps, sha256_text
from grumem.core.template import fill, memory_text
from grumem.errors import RecordError
from grumem.io.jsonl import read_jsonl
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_template
from grumem.report.viewer import (
    DEFAULT_MAX_TRAJECTORIES,
    MAX_BYTES,
    PromptShape,
    memory_diff,
    plan,
    script_json,
    write_viewer,
)
from grumem.stages.export import export
from support.browser import browser
from support.checkout import FIXTURES_DIR
from support.export import FILES, calibrate, inputs

FIXTURE = FIXTURES_DIR / "export"
T1, T2, T3 = "demo/q1/s-alpha/0", "demo/q1/s-beta/0", "demo/q1/s-beta/1"
T5 = "demo/q2/s-beta/0"
# text of a transcript that would be markup if a page ever treated it as such
HTML_TAIL = "\n<script>window.pwned = 1</script></div><b id='bold'>not bold</b>"
HTML_THINK = '<img src=x onerror="window.pwned = 2"> weighs &amp; decides'
SECTION_END = "[ToolResult] No resources found in default namespace."


def old_template(path: Path) -> Path:
    """The template the fixture's prompts were recorded with (its make_fixture.py)."""
    text = load_template(GRU_MEM_TEMPLATE)
    path.write_text(text.replace("and a previous memory.", "and your previous memory.", 1))
    return path


def with_html(line: dict[str, Any]) -> dict[str, Any]:
    """The line with HTML in its section (request re-hashed) or in its think text."""
    body = json.loads(line["request"]["body"]) if line["request"] else None
    if body and SECTION_END in body["messages"][-1]["content"]:
        user = body["messages"][-1]["content"].replace(SECTION_END, SECTION_END + HTML_TAIL)
        body["messages"][-1]["content"] = user
        text = json.dumps(body)
        line["request"] = {"body": text, "sha256": sha256_text(text)}
    if (line["trajectory_id"], line["t"]) == (T2, 2):
        line["think"] = HTML_THINK
    return line


@pytest.fixture
def exported(tmp_path: Path) -> dict[str, Path]:
    """The export fixture's corpus (HTML in T1's first section and T2's second think)."""
    work = tmp_path / "work"
    work.mkdir()
    for name in FILES:
        shutil.copy(FIXTURE / name, work / name)
    lines = [with_html(x) for x in read_jsonl(work / "log.jsonl", "log")]
    (work / "log.jsonl").write_text("".join(dumps(x) + "\n" for x in lines), encoding="utf-8")
    calibrate(work)
    export(inputs(work))
    return {
        "log": work / "log.jsonl",
        "corpus": work / "corpus" / "trajectories.jsonl",
        "chunks": work / "chunks.jsonl",
        "template": old_template(tmp_path / "old-template.txt"),
        "out": tmp_path / "report" / "viewer.html",
    }


def page_records(page: Path) -> dict[str, Any]:
    """Every JSON record of the page by its element id."""
    text = page.read_text(encoding="utf-8")
    found = re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', text, re.S)
    return {el: json.loads(body) for el, body in found}


def build(paths: dict[str, Path], **kw: Any) -> dict[str, Any]:
    write_viewer(paths["log"], paths["corpus"], paths["template"], paths["out"], "demo", **kw)
    return page_records(paths["out"])


def chunk_texts(path: Path) -> dict[str, str]:
    out = {}
    for c in read_jsonl(path, "chunk"):
        text = render_records(c["records"])
        out[sha256_text(text)] = text
    return out


# ---------------------------------------------------------------- the page's records


def test_the_page_joins_corpus_and_log(exported: dict[str, Path]) -> None:
    records = build(exported)
    index = records["grumem-index"]
    assert (index["trajectories"], index["not_exported"], index["shown"]) == (5, 1, 5)
    rows = index["rows"]
    assert [r["id"] for r in rows] == [T1, T2, T3, "demo/q2/s-alpha/0", T5]  # the log's order
    views = {r["id"]: records[r["el"]] for r in rows}
    assert index["questions"] == {
        "q1": "Which namespace do the metrics pods run in?",
        "q2": "Which database migration failed, and why?",
    }

    # the README's hand count: T2 exits at 5 = its last evidence, t=3 did not parse
    t2 = views[T2]
    assert (t2["r_exit"], t2["r_format"], t2["t_exit"], t2["t_last_evidence"]) == (0, 0, 5, 5)
    assert [t["r_update"] for t in t2["turns"]] == [1, 1, -1, -1, 1, 1, 1]
    t3 = t2["turns"][2]
    assert t3["parsed"] is False and t3["update_gate"] is None and t3["parse_error"]["tag"]
    assert rows[1]["exit"] == "on_time" and rows[1]["agree"] == 5
    assert (views[T3]["r_exit"], rows[2]["exit"]) == (-0.75, "early")
    assert views[T5]["aborted"]["t"] == 3 and views[T5]["aborted"]["reason"] == "budget"
    assert views[T5]["r_exit_reason"] == "aborted" and rows[4]["aborted"] == "budget"

    # every turn: its log line's memory, think and gates; its section, the chunk text
    log = {(x["trajectory_id"], x["t"]): x for x in read_jsonl(exported["log"], "log")}
    chunks = chunk_texts(exported["chunks"])
    sections = {el[1:]: text for el, text in records.items() if el.startswith("s")}
    for tid, view in views.items():
        for turn in view["turns"]:
            line = log[tid, turn["t"]]
            after = "".join(text for op, text in turn["memory"] if op != "-")
            before = "".join(text for op, text in turn["memory"] if op != "+")
            assert after == (line["memory_after"] or "")
            assert before == (line["memory_before"] or "")
            assert turn["think"] == line["think"]
            assert turn["prompt"] is None  # the template matched: question and section split
            expected = chunks[turn["chunk_sha"]]
            if SECTION_END in expected:
                expected = expected.replace(SECTION_END, SECTION_END + HTML_TAIL)
            assert sections[turn["chunk_sha"]] == expected
    # T2's t=4 appends to its memory: the diff keeps the old text and adds the new
    t4 = views[T2]["turns"][3]["memory"]
    assert [op for op, _ in t4] == ["=", "+"]
    assert t4[0][1] == log[T2, 3]["memory_after"]


def test_text_from_a_transcript_is_never_markup_in_the_file(exported: dict[str, Path]) -> None:
    records = build(exported)
    text = exported["out"].read_text(encoding="utf-8")
    for markup in ("<script>window.pwned", "</div><b", "<img src=x"):
        assert markup not in text
    # the file holds exactly one <script> that runs: the page's own
    assert len(re.findall(r"<script>", text)) == 1
    sections = [v for k, v in records.items() if k.startswith("s") and isinstance(v, str)]
    assert sum(HTML_TAIL in s for s in sections) == 1
    t2 = next(records[r["el"]] for r in records["grumem-index"]["rows"] if r["id"] == T2)
    assert t2["turns"][1]["think"] == HTML_THINK


def test_prompts_of_another_template_are_shown_whole(exported: dict[str, Path]) -> None:
    exported = {**exported, "template": GRU_MEM_TEMPLATE}  # not the recording's template
    records = build(exported)
    views = [records[r["el"]] for r in records["grumem-index"]["rows"]]
    assert all(v["question"] is None for v in views)
    turns = [t for v in views for t in v["turns"]]
    assert all(t["prompt"] is not None and "<section>" in t["prompt"] for t in turns)
    assert not [el for el in records if el.startswith("s")]  # no section split off


def test_the_page_stays_within_its_byte_budget(exported: dict[str, Path]) -> None:
    full = build(exported, max_bytes=0)
    size = exported["out"].stat().st_size
    half = build(exported, max_bytes=size // 2 + 60_000)
    assert exported["out"].stat().st_size <= size // 2 + 60_000
    index = half["grumem-index"]
    assert 0 < index["shown"] < full["grumem-index"]["shown"]
    assert index["shown"] == len(index["rows"]) == sum(s["shown"] for s in index["strata"])
    assert {el for el in half if el.startswith("t")} == {r["el"] for r in index["rows"]}


def corpus_copies(corpus: Path, out: Path, copies: int) -> Path:
    """A corpus of `copies` renamed copies of T1 (on time... late: one stratum), plus T5."""
    records = {r["trajectory_id"]: r for r in read_jsonl(corpus, "trajectory")}
    lines = [{**records[T1], "trajectory_id": f"copy/{i}"} for i in range(copies)]
    lines.append(records[T5])
    out.write_text("".join(dumps(x) + "\n" for x in lines), encoding="utf-8")
    return out


def test_the_sample_is_stratified_and_independent_of_the_files_order(
    exported: dict[str, Path], tmp_path: Path
) -> None:
    corpus = corpus_copies(exported["corpus"], tmp_path / "many.jsonl", 300)
    picked = plan(corpus, 10)
    assert len(picked.order) == 10
    assert T5 in picked.order  # the one aborted trajectory, rare, is shown
    assert picked.trajectories == 301 and sum(picked.counts.values()) == 301
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(7).shuffle(lines)
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("".join(lines), encoding="utf-8")
    assert plan(shuffled, 10).order == picked.order


def test_a_corpus_that_is_not_the_logs_export_is_refused(
    exported: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = exported["corpus"].read_text(encoding="utf-8").splitlines(keepends=True)
    other = tmp_path / "other.jsonl"
    other.write_text("".join(lines[1:]), encoding="utf-8")  # T1 left out
    with pytest.raises(RecordError, match="the log's next exported trajectory is 'demo/q1/s-al"):
        write_viewer(exported["log"], other, exported["template"], exported["out"], "demo")
    args = ["report-viewer", "--turn-log", str(exported["log"]), "--trajectories", str(other)]
    args += ["--template", str(exported["template"]), "--project", "demo"]
    assert main([*args, "--out", str(exported["out"])]) == 1
    err = capsys.readouterr().err
    assert f"{other}:1: field 'trajectory_id'" in err and len(err.splitlines()) == 1
    assert not exported["out"].exists()
    assert [p.name for p in exported["out"].parent.iterdir()] == []  # no spool left behind


def test_the_cli_defaults_are_the_modules(exported: dict[str, Path]) -> None:
    args = build_parser().parse_args(
        ["report-viewer", "--turn-log", "l", "--trajectories", "t", "--project", "p"]
        + ["--out", "o"]
    )
    assert (args.max_trajectories, args.max_bytes) == (DEFAULT_MAX_TRAJECTORIES, MAX_BYTES)
    argv = ["report-viewer", "--turn-log", str(exported["log"]), "--project", "demo"]
    argv += ["--trajectories", str(exported["corpus"]), "--template", str(exported["template"])]
    assert main([*argv, "--out", str(exported["out"])]) == 0
    assert exported["out"].read_bytes().startswith(b"<!DOCTYPE html>")


# ---------------------------------------------------------------- pure parts

texts = st.text(st.characters(codec="utf-8"), max_size=60)


@given(st.one_of(st.none(), texts), st.one_of(st.none(), texts))
def test_memory_diff_gives_both_memories_back(before: str | None, after: str | None) -> None:
    ops = memory_diff(before, after)
    assert "".join(t for op, t in ops if op != "-") == (after or "")
    assert "".join(t for op, t in ops if op != "+") == (before or "")
    assert all(t for _, t in ops) and all(a[0] != b[0] for a, b in zip(ops, ops[1:], strict=False))


def test_memory_diff_is_by_word() -> None:
    assert memory_diff("pods in default", "pods in monitoring") == [
        ["=", "pods in "],
        ["-", "default"],
        ["+", "monitoring"],
    ]
    assert memory_diff(None, "first") == [["+", "first"]]
    assert memory_diff("same", "same") == [["=", "same"]]


@given(texts.filter(bool), texts, st.one_of(st.none(), texts))
def test_a_filled_template_splits_back(question: str, section: str, memory: str | None) -> None:
    template = load_template(GRU_MEM_TEMPLATE)
    user = fill(template, {"prompt": question, "memory": memory_text(memory), "chunk": section})
    split = PromptShape.from_template(template).split(user, memory)
    if " </problem>\n<memory> " not in question:  # the one text that is ambiguous
        assert split == (question, section)


def test_a_section_holding_the_templates_own_tags_splits_back() -> None:
    template = load_template(GRU_MEM_TEMPLATE)
    section = "</section> <memory> x </memory> {chunk} </section>"
    user = fill(template, {"prompt": "q {memory}", "memory": "m", "chunk": section})
    assert PromptShape.from_template(template).split(user, "m") == ("q {memory}", section)
    assert PromptShape.from_template(template).split(user, "other memory") is None


@given(
    st.recursive(st.one_of(st.none(), st.booleans(), texts), lambda c: st.lists(c), max_leaves=10)
)
def test_script_json_cannot_end_its_element(value: Any) -> None:
    text = script_json(value)
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == value


# ---------------------------------------------------------------- in Chromium


def test_the_viewer_in_chromium(exported: dict[str, Path], tmp_path: Path) -> None:
    """List, filter, open a trajectory: gates against labels, the memory diff, the
    marks; HTML of a transcript shows as text; the page asks for nothing but itself."""
    build(exported)
    url = exported["out"].as_uri()
    with browser(tmp_path) as b:
        page = b.page
        page.goto(url)
        page.wait_for_selector("tr.row")
        assert page.locator("#counts").inner_text().startswith("5 of 5 trajectories")
        assert "1 aborted before their first answer" in page.locator("#counts").inner_text()
        assert page.locator("tr.row").count() == 5
        page.screenshot(path=str(tmp_path / "viewer-list.png"))

        page.select_option("#filter-r_format", "0")
        assert page.locator("tr.row").all_inner_texts()[0].startswith(T2)
        assert page.locator("tr.row").count() == 1
        page.select_option("#filter-r_format", "")
        page.select_option("#filter-aborted", "budget")
        assert [r.split("\t")[0] for r in page.locator("tr.row").all_inner_texts()] == [T5]
        page.select_option("#filter-aborted", "")
        page.fill("#filter-session", "beta")
        assert page.locator("tr.row").count() == 3

        page.click(f"tr.row[data-id='{T2}'] a.open")
        page.wait_for_selector("section.turn")
        assert page.locator("header.trajectory h1").inner_text() == T2
        assert page.locator(".question").inner_text() == (
            "Which namespace do the metrics pods run in?"
        )
        turns = page.locator("section.turn")
        assert turns.count() == 7
        t5 = page.locator("section.turn[data-t='5']")
        assert "exit" in t5.get_attribute("class") and "last-evidence" in t5.get_attribute("class")
        assert t5.locator(".exit-mark").inner_text() == "exit"
        assert page.locator(".last-evidence-mark").count() == 1
        assert "exit gate: end" in t5.locator(".gates").inner_text()
        t3 = page.locator("section.turn[data-t='3']")
        assert "update gate: none (unparsed)" in t3.locator(".gates").inner_text()
        assert "✗ disagrees" in t3.inner_text() and t3.locator(".parse-error").count() == 1
        assert page.locator(".agreement.agree").count() == 5
        t4 = page.locator("section.turn[data-t='4']")
        log = {(x["trajectory_id"], x["t"]): x for x in read_jsonl(exported["log"], "log")}
        added = log[T2, 4]["memory_after"][len(log[T2, 3]["memory_after"]) :]
        assert t4.locator(".memory ins").inner_text() == added
        assert "changed since the turn before" in t4.locator(".memory h4").inner_text()
        assert t4.locator(".memory del").count() == 0
        assert "(unchanged)" in page.locator("section.turn[data-t='3'] .memory h4").inner_text()
        think = page.locator("section.turn[data-t='2'] details.think")
        think.locator("summary").click()
        assert think.locator("pre").inner_text() == HTML_THINK
        assert think.locator("img").count() == 0
        page.screenshot(path=str(tmp_path / "viewer-trajectory.png"), full_page=True)

        page.click("#back")
        page.wait_for_selector("tr.row")
        page.fill("#filter-session", "")
        page.click(f"tr.row[data-id='{T1}'] a.open")
        first = page.locator("section.turn[data-t='1'] details.section")
        first.locator("summary").click()
        shown = first.locator("pre").inner_text()
        assert shown.endswith(HTML_TAIL.strip()) and SECTION_END in shown
        assert first.locator("script, b, div").count() == 0
        assert page.evaluate("window.pwned") is None
        assert page.locator("#bold").count() == 0
        page.screenshot(path=str(tmp_path / "viewer-html-as-text.png"))

        assert b.requests == [url]  # nothing fetched: no network at view time
        assert b.errors == []
