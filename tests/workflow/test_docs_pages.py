"""The README and docs/ as pages a reader follows: a README a newcomer reads first (the
two commands, the picture of the workflow, the Layout, a link to every page), links
that lead somewhere, and a picture of the workflow that is the workflow's.

Their commands are run by test_docs_commands.py; the Layout table is held to the code
by tests/package/test_readme_layout.py."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support.workflow import REPO, checkout_copy, shell

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 200

FENCE_RE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN_RE = re.compile(r"`[^`\n]*`")
LINK_RE = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING_RE = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def without_blocks(text: str) -> str:
    """The text without code blocks (a `# comment` there is no heading); a block keeps
    its lines, so line numbers stay those of the file."""
    return FENCE_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are no links."""
    return CODE_SPAN_RE.sub("", without_blocks(text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated heading's gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for m in HEADING_RE.finditer(without_blocks(text)):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(page: Path, text: str) -> list[str]:
    """Each relative link of `text` (a page at `page`) whose file or heading is missing."""
    problems = []
    body = prose(text)
    for m in LINK_RE.finditer(body):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        where = f"{page.relative_to(REPO)}:{body[: m.start()].count(chr(10)) + 1}"
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve()
        if path and not file.is_file():
            problems.append(f"{where}: ({target}): no file {path}")
            continue
        if not anchor:
            continue
        headings = anchors(text if not path else file.read_text("utf-8"))
        if (path and file.suffix != ".md") or anchor not in headings:
            problems.append(f"{where}: ({target}): no heading #{anchor} in {path or page.name}")
    return problems


# ----------------------------------------------------------------- the README


def test_the_readme_is_a_page_a_newcomer_reads_first() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < README_MAX_LINES, (
        f"README.md has {len(lines)} lines: operating detail goes to a page of docs/"
    )
    # the two commands come first, before any prose
    assert lines[:6] == [
        "# grumem",
        "",
        "```sh",
        "make run     # the bundled demo project, end to end, with the embedded local LLM",
        "make test    # every test, then lint and format checks (what CI runs)",
        "```",
    ]
    assert "](docs/rulegraph.svg)" in text
    assert "\n## Layout\n" in text
    linked = {m.group(1).partition("#")[0] for m in LINK_RE.finditer(prose(text))}
    for page in PAGES[1:]:
        assert page.relative_to(REPO).as_posix() in linked, f"README.md links no {page.name}"


# ----------------------------------------------------------------- links


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page, page.read_text(encoding="utf-8")) == []


def test_a_broken_link_is_named() -> None:
    page = REPO / "docs" / "x.md"
    text = (
        "# X\n\nSee [cluster](cluster.md#several-endpoints), [gone](gone.md),\n"
        "[no such part](cluster.md#nowhere), [here](#x), [web](https://example.org) and\n"
        "`[not a link](gone.md)`.\n\n```sh\n[not a link](gone.md)\n```\n"
        "[the picture](rulegraph.svg), [up](../README.md#layout), [lost](#y)\n"
    )
    assert broken_links(page, text) == [
        "docs/x.md:3: (gone.md): no file gone.md",
        "docs/x.md:4: (cluster.md#nowhere): no heading #nowhere in cluster.md",
        "docs/x.md:10: (#y): no heading #y in x.md",
    ]


def test_anchors_are_githubs() -> None:
    text = "# What `make run` does\n## κ, or the export refuses\n## A B\n## A B\n"
    assert anchors(text) == {"what-make-run-does", "κ-or-the-export-refuses", "a-b", "a-b-1"}
    assert slug("Online training (the paper's algorithm)") == "online-training-the-papers-algorithm"


# ----------------------------------------------------------------- the picture

DOT_NODE_RE = re.compile(r'^\s*(\d+)\[label = "([^"]+)"', re.MULTILINE)
DOT_EDGE_RE = re.compile(r"^\s*(\d+) -> (\d+)\s*$", re.MULTILINE)
RULE_RE = re.compile(r"^rule (\w+):", re.MULTILINE)


def dot_graph(text: str) -> tuple[set[str], set[tuple[str, str]]]:
    """The rules of a rule graph in dot text and its edges, by rule name."""
    label = dict(DOT_NODE_RE.findall(text))
    return set(label.values()), {(label[a], label[b]) for a, b in DOT_EDGE_RE.findall(text)}


def svg_graph(text: str) -> tuple[set[str], set[tuple[str, str]]]:
    """The same, read from graphviz's SVG: a node is a group titled by its dot id and
    holding its label, an edge a group titled `a->b`."""
    ns = {"svg": "http://www.w3.org/2000/svg"}
    label: dict[str, str] = {}
    edges = []
    for g in ET.fromstring(text).iter(f"{{{ns['svg']}}}g"):
        title = g.findtext("svg:title", namespaces=ns)
        if g.get("class") == "node" and title is not None:
            label[title] = g.findtext("svg:text", namespaces=ns) or ""
        elif g.get("class") == "edge" and title is not None:
            edges.append(title.split("->"))
    return set(label.values()), {(label[a], label[b]) for a, b in edges}


def workflow_rules() -> set[str]:
    files = [REPO / "Snakefile", *(REPO / "workflow" / "rules").glob("*.smk")]
    return {r for f in files for r in RULE_RE.findall(f.read_text(encoding="utf-8"))}


def test_the_committed_picture_is_drawn_from_its_dot_text() -> None:
    dot = (REPO / "docs" / "rulegraph.dot").read_text(encoding="utf-8")
    svg = (REPO / "docs" / "rulegraph.svg").read_text(encoding="utf-8")
    rules, edges = dot_graph(dot)
    assert svg_graph(svg) == (rules, edges), "docs/rulegraph.svg: run `make rulegraph`"
    # every rule is in the picture of `all` but `export`, the target of the corpora
    # alone; the export waits on the log and the labels
    assert rules == workflow_rules() - {"export"}
    assert {("log", "export_project"), ("labels", "export_project")} <= edges


@pytest.mark.slow
def test_the_picture_is_the_workflows(tmp_path: Path) -> None:
    """`make rulegraph` in a copy of the checkout draws the committed docs/rulegraph.dot
    byte for byte: a rule or an input changed without a new picture fails here."""
    if shutil.which("dot") is None:
        pytest.fail("graphviz's `dot` is missing: `make test` installs it (make system)")
    checkout_copy(tmp_path, None)
    shell(tmp_path, "make --no-print-directory rulegraph", "make rulegraph")
    drawn = (tmp_path / "docs" / "rulegraph.dot").read_text(encoding="utf-8")
    committed = (REPO / "docs" / "rulegraph.dot").read_text(encoding="utf-8")
    assert drawn == committed, "docs/rulegraph.dot is stale: run `make rulegraph`, commit both"
    assert svg_graph((tmp_path / "docs" / "rulegraph.svg").read_text("utf-8")) == dot_graph(drawn)
