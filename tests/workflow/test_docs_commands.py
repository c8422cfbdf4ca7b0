"""Every command the README and docs/ show is run here, on the demo, as a reader would
type it: a renamed target, subcommand or flag fails this test, not the user.

A fenced `sh` block is read line by line; a command is a
logical line (backslash continuations joined) whose program is `snakemake`, `grumem`
or `make`, or that runs one inside `$(...)`. Each file's commands run in order in a
fresh copy of the workflow whose config.yaml is the demo's, pointed at the fake
OpenAI server (tests/support) instead of the embedded model:

- `snakemake ...` and `grumem ...` run as written, in a shell without the venv on
  PATH; after a line `. .venv/bin/activate` in a block, the block's later commands
  run with the venv activated (each line is its own shell: the activation is
  repeated for it);
- `make T` runs as `make -n T` (the recipe is printed, not run: `make test` would run
  this test), and every `snakemake` line of that recipe runs as written.

A block may carry a marker on the line before its fence, with the reason beside it:
`<!-- tests: dry run: REASON -->` runs its snakemake commands with `-n` (a cluster
profile), `<!-- tests: not run: REASON -->` runs none of them (a GPU). Every other
line of a `sh` block is a command of ours or the venv's activation, so no block is
skipped in silence. What a person does between two commands (labelling a calibration
sample) is done by HUMAN_STEPS; `grumem discover` runs with HOME a reader's home
holding the transcript fixtures where each agent keeps its logs (support.fake_home).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.fake_home import fake_home
from support.workflow import (
    FAKE_DEMO,
    PINNED_DEMO_CORPUS,
    REPO,
    checkout_copy,
    corpus_digests,
    docs_env,
    fake_demo_script,
    read_lines,
    shell,
    write_config,
)

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OURS = {"snakemake", "grumem", "make"}
SHELL_LANGUAGES = {"sh", "bash", "shell"}
FENCE_RE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
MARKER_RE = re.compile(r"<!--\s*tests:\s*(dry run|not run):\s*(.*?)\s*-->\s*\n*$")
ACTIVATE_RE = re.compile(r"^(?:\.|source)\s+\.venv/bin/activate(?:\s|$)")
ACTIVATE = ". .venv/bin/activate && "


@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    text: str
    mode: str  # "run", "dry run" or "not run"
    reason: str = ""
    activated: bool = False  # after `. .venv/bin/activate` in its block

    @property
    def program(self) -> str:
        return program_of(self.text)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def program_of(text: str) -> str:
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # not shell (a listing): its first word still tells
        words = text.split()
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]
    return Path(words[0]).name if words else ""


def runs_ours(text: str) -> bool:
    if program_of(text) in OURS:
        return True
    return any(program_of(inner) in OURS for inner in re.findall(r"\$\(([^)]*)\)", text))


def logical_lines(body: str, first_line: int) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for n, raw in enumerate(body.splitlines(), first_line):
        if pending is not None:
            pending = (pending[0], pending[1] + " " + raw.strip())
        elif raw.strip() and not raw.lstrip().startswith("#"):
            pending = (n, raw.strip())
        if pending is not None and not pending[1].endswith("\\"):
            lines.append(pending)
            pending = None
        elif pending is not None:
            pending = (pending[0], pending[1][:-1].rstrip())
    return lines


@dataclass(frozen=True)
class ShellBlock:
    first_line: int  # of the block's body, from 1
    body: str
    mode: str  # "run", "dry run" or "not run", from the marker before its fence
    reason: str


def shell_blocks(text: str) -> list[ShellBlock]:
    blocks = []
    for block in FENCE_RE.finditer(text):
        if block.group(1) not in SHELL_LANGUAGES:
            continue
        before = text[: block.start()]
        marker = MARKER_RE.search(before.rsplit("```", 1)[-1][-300:])
        mode, reason = (marker.group(1), marker.group(2)) if marker else ("run", "")
        blocks.append(ShellBlock(before.count("\n") + 2, block.group(2), mode, reason))
    return blocks


def commands_in(text: str, name: str) -> list[Command]:
    commands = []
    for block in shell_blocks(text):
        activated = False
        for n, line in logical_lines(block.body, block.first_line):
            if ACTIVATE_RE.match(line):
                activated = True
            elif runs_ours(line):
                commands.append(Command(name, n, line, block.mode, block.reason, activated))
    return commands


def unrun_lines(text: str, name: str) -> list[str]:
    """What a reader would type from a `sh` block that no test runs: a line that is
    neither a command of ours nor the venv's activation, or a block with no command of
    ours, unless its marker says `not run` and why."""
    problems = []
    for block in shell_blocks(text):
        if block.mode == "not run":
            continue
        lines = logical_lines(block.body, block.first_line)
        problems += [
            f"{name}:{n}: `{line}` is not run: a command of ours, or mark the block"
            " `<!-- tests: not run: REASON -->`"
            for n, line in lines
            if not (runs_ours(line) or ACTIVATE_RE.match(line))
        ]
        if not any(runs_ours(line) for _, line in lines):
            problems.append(f"{name}:{block.first_line}: a sh block with no command of ours")
    return problems


def documented_commands(path: Path) -> list[Command]:
    return commands_in(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix())


ALL_COMMANDS = [c for doc in DOCS for c in documented_commands(doc)]


# ----------------------------------------------------------------- the extraction


def test_the_docs_show_the_two_commands_and_snakemake_export() -> None:
    """The extraction finds the README's two commands and `snakemake export`: a parser
    that found nothing would pass every test below."""
    readme = [c.text for c in ALL_COMMANDS if c.doc == "README.md"]
    assert readme[:2] == [
        "make run     # the bundled demo project, end to end, with the embedded local LLM",
        "make test    # every test, then lint and format checks (what CI runs)",
    ]
    texts = " ".join(c.text for c in ALL_COMMANDS)
    for needed in ("snakemake -n export", "--rulegraph mermaid-js export", "--dag dot export"):
        assert needed in texts
    # `snakemake export` as its user types it: the venv activated, no path
    card = [c for c in ALL_COMMANDS if c.text.split("#")[0].strip() == "snakemake -n export"]
    assert card and all(c.activated for c in card)


def test_no_shell_block_is_skipped_in_silence() -> None:
    for doc in DOCS:
        assert unrun_lines(doc.read_text(encoding="utf-8"), doc.name) == []


def test_a_shell_block_that_would_not_run_is_named() -> None:
    text = (
        "```sh\nmake run\ncd elsewhere\n```\n\n```sh\nvllm serve m\n```\n\n"
        "<!-- tests: not run: needs a GPU node -->\n```sh\nvllm serve m\n```\n"
    )
    assert unrun_lines(text, "x.md") == [
        "x.md:3: `cd elsewhere` is not run: a command of ours, or mark the block"
        " `<!-- tests: not run: REASON -->`",
        "x.md:7: `vllm serve m` is not run: a command of ours, or mark the block"
        " `<!-- tests: not run: REASON -->`",
        "x.md:7: a sh block with no command of ours",
    ]


def test_every_exempt_block_says_why() -> None:
    for c in ALL_COMMANDS:
        if c.mode != "run":
            assert len(c.reason) >= 10, f"{c}: a `tests: {c.mode}` marker needs its reason"


def test_no_command_hides_in_a_block_of_another_language() -> None:
    """A block without a language, or labelled `text`, is not run: it may hold no command
    of ours (label it `sh`)."""
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in FENCE_RE.finditer(text):
            if block.group(1) in SHELL_LANGUAGES or block.group(1) in {"yaml", "python", "toml"}:
                continue
            for _, line in logical_lines(block.group(2), 1):
                assert not runs_ours(line), (
                    f"{doc.name}: `{line}` is in a ```{block.group(1)} block"
                )


def test_logical_lines_join_continuations_and_skip_comments() -> None:
    body = "# a comment\nmake run  # why\n.venv/bin/grumem prompt \\\n    --index 0\n\n"
    assert logical_lines(body, 10) == [
        (11, "make run  # why"),
        (12, ".venv/bin/grumem prompt --index 0"),
    ]
    assert runs_ours("X=1 .venv/bin/snakemake -n export")
    block = "```sh\nsnakemake -n all\n. .venv/bin/activate  # why\nsnakemake -n export\n```\n"
    assert [(c.text, c.activated) for c in commands_in(block, "x.md")] == [
        ("snakemake -n all", False),
        ("snakemake -n export", True),
    ]
    assert runs_ours(".venv-verl/bin/python -m verl $(.venv/bin/grumem verl-config --corpus c)")
    assert not runs_ours("data.train_files=/x/src/grumem/verl/reward.py")


# ----------------------------------------------------------------- running them


def label_the_sample_as_a_person_would(work: Path) -> None:
    """docs/judge.md step 2: every pair of the sample gets a yes or a no. The answers
    are the demo's own labels of those pairs, so the calibration agrees with the
    judge as a careful person's would on the demo."""
    truth = {
        (x["query_id"], x["chunk_sha"]): x["evidence"]
        for x in read_lines(work / "fixtures/demo/labels.jsonl")
    }
    sample = work / "calibration-sample.jsonl"
    lines = read_lines(sample)
    for x in lines:
        x["evidence"] = truth[(x["query_id"], x["chunk_sha"])]
    sample.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


# after a command whose text holds the key, the person's step
HUMAN_STEPS: dict[str, Callable[[Path], None]] = {
    "grumem calibrate-sample": label_the_sample_as_a_person_would,
}


def readers_home(work: Path) -> Path:
    """The home of a reader who runs agents: the transcript fixtures where each tool
    keeps its logs (what `grumem discover` finds), made once per checkout."""
    home = work / "home"
    if not home.exists():
        fake_home(home)
    return home


def with_dry_run(text: str) -> str:
    words = shlex.split(text, comments=True)
    at = next(i for i, w in enumerate(words) if Path(w).name in {"snakemake", "make"})
    return shlex.join([*words[: at + 1], "-n", *words[at + 1 :]])


def run_documented(work: Path, c: Command) -> None:
    if c.program == "make":
        # the recipe, printed: make resolves the target and its variables
        recipe = shell(work, with_dry_run(c.text), str(c)).stdout
        if c.mode == "run":
            for line in recipe.splitlines():
                if program_of(line) == "snakemake":
                    shell(work, line, f"{c} (its recipe line `{line}`)")
        return
    text = with_dry_run(c.text) if c.mode == "dry run" else c.text
    home = readers_home(work) if "grumem discover" in text else None
    shell(work, ACTIVATE + text if c.activated else text, str(c), home=home)
    for key, step in HUMAN_STEPS.items():
        if key in c.text.replace(".venv/bin/", ""):
            step(work)


@pytest.mark.slow
@pytest.mark.parametrize("doc", [d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_documented_command_runs(doc: str, tmp_path: Path, fake_server) -> None:
    commands = [c for c in ALL_COMMANDS if c.doc == doc and c.mode != "not run"]
    if not commands:
        # test_no_shell_block_is_skipped_in_silence: then every sh block says why
        assert all(b.mode == "not run" for b in shell_blocks((REPO / doc).read_text("utf-8")))
        pytest.skip(f"{doc} shows no command of ours that can run here")
    if shutil.which("dot") is None and any("dot -T" in c.text for c in commands):
        pytest.fail("graphviz's `dot` is missing: `make test` installs it (make system)")
    server = fake_server(FAKE_DEMO)
    checkout_copy(tmp_path, server.base_url)
    for c in commands:
        run_documented(tmp_path, c)


def test_a_failing_command_fails_its_page(tmp_path: Path) -> None:
    """The runner is no formality: a command that exits non-zero fails the page."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    run_documented(tmp_path, Command("x.md", 1, ".venv/bin/grumem --help", "run"))
    with pytest.raises(AssertionError, match=r"x.md:2: .venv/bin/grumem no-such-command"):
        run_documented(tmp_path, Command("x.md", 2, ".venv/bin/grumem no-such-command", "run"))


# ----------------------------------------------------------------- "When a run dies"

CRASH_RECOVERY = "docs/crash-recovery.md"


def section_commands(doc: str, heading: str) -> list[Command]:
    text = (REPO / doc).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    first_line = text[:start].count("\n") + 2
    section = text[start + 1 : end if end != -1 else None]
    return [
        Command(doc, c.line + first_line - 1, c.text, c.mode, c.reason)
        for c in commands_in(section, doc)
    ]


def cached_requests(work: Path) -> set[str]:
    return {p.stem for p in (work / "results/cache/llm").glob("??/*.json")}


@pytest.mark.slow
def test_a_killed_run_resumes_with_the_documented_commands(tmp_path: Path, fake_server) -> None:
    """kill -9 of Snakemake and its jobs mid-`responses` (a node failure), then the
    two commands of docs/crash-recovery.md: the rerun sends none of the requests
    answered before the kill, every other one once, and the corpus is the pinned demo
    corpus."""
    unlock, rerun = (c.text for c in section_commands(CRASH_RECOVERY, "## When a run dies"))
    assert program_of(unlock) == program_of(rerun) == "snakemake" and "--unlock" in unlock
    # slow answers: the kill lands while the two responses jobs are mid-way
    server = fake_server(fake_demo_script(latency_s=0.4))
    checkout_copy(tmp_path, server.base_url)
    write_config(tmp_path, server.base_url)  # the pinned demo config
    run = subprocess.Popen(
        ["bash", "-c", rerun], cwd=tmp_path, env=docs_env(), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while len(cached_requests(tmp_path)) < 12:
        assert run.poll() is None, "the run ended before the kill"
        assert time.monotonic() < deadline, "no answers cached in 300 s"
        time.sleep(0.02)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    answered = cached_requests(tmp_path)
    sent_before = dict(server.stats()["by_sha"])
    assert 12 <= len(answered) < 72

    # the lock the page speaks of
    locked = shell(tmp_path, rerun, "the rerun before --unlock", check=False)
    assert locked.returncode != 0 and "cannot be locked" in locked.stdout + locked.stderr
    assert server.stats()["by_sha"] == sent_before

    shell(tmp_path, unlock, f"{CRASH_RECOVERY}'s --unlock")
    shell(tmp_path, rerun, f"{CRASH_RECOVERY}'s rerun")
    sent_after = server.stats()["by_sha"]
    resent = {sha for sha, n in sent_after.items() if n > sent_before.get(sha, 0)}
    assert resent & answered == set()
    assert resent | answered == set(sent_after) and len(sent_after) == 72
    assert corpus_digests(tmp_path) == PINNED_DEMO_CORPUS
