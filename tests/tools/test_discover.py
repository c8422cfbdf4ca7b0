"""`grumem discover`: the transcript fixtures placed in a fake home where each tool keeps
its logs are found, counted and dated; `--write` makes a config that the real
`snakemake --configfile cfg.yaml -n all` plans for every project found; nothing
outside the known places is reported, and no transcript is opened."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from grumem.tools import discover
from support.fake_home import fake_home
from support.workflow import env, jobs, snakemake


def grumem(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grumem", "discover", *args],
        capture_output=True,
        text=True,
        env=env(),
        cwd=cwd,
        timeout=120,
    )


def stamp(paths: list[Path], *days: str) -> None:
    """Modification times: the first file on the first day, the others on the last."""
    for i, p in enumerate(paths):
        t = datetime.fromisoformat(days[0 if i == 0 else -1]).replace(tzinfo=UTC).timestamp()
        os.utime(p, (t, t))


@pytest.fixture
def home(tmp_path: Path) -> tuple[Path, dict[str, list[Path]]]:
    root = tmp_path / "home"
    placed = fake_home(root)
    stamp(placed["codex-cli"], "2025-11-03T09:00:00", "2025-11-04T17:00:00")
    stamp(placed["gemini-cli"], "2026-05-06T14:00:00", "2026-09-14T10:00:00")
    return root, placed


def test_every_format_is_found_counted_sized_and_dated(home) -> None:
    root, placed = home
    r = grumem("--home", str(root))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    rows = {}
    for line in out.splitlines():
        words = line.split()
        if words and words[0] in placed:
            rows.setdefault(words[0], []).append(line)
    assert sorted(rows) == sorted(placed)
    codex = rows["codex-cli"][0].split()
    size = sum(p.stat().st_size for p in placed["codex-cli"])
    assert codex[1:3] == ["2", "2"]  # sessions, files
    assert " ".join(codex[3:5]) == discover.human_size(size)
    assert codex[5:7] == ["2025-11-03", "2025-11-04"]
    assert codex[7] == f"{root}/.codex/sessions/*/*/*/rollout-*.jsonl"
    gemini = rows["gemini-cli"][0].split()
    assert gemini[1:3] == ["3", "3"] and gemini[5:7] == ["2026-05-06", "2026-09-14"]
    # one row per place: Cline in VS Code on Linux, Roo Code in Cursor on macOS
    assert [line.split(maxsplit=7)[7] for line in rows["anthropic"]] == [
        f"{root}/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks/*"
        "/api_conversation_history.json",
        f"{root}/Library/Application Support/Cursor/User/globalStorage/rooveterinaryinc.roo-cline"
        "/tasks/*/api_conversation_history.json",
    ]
    assert out.startswith("Looked in ") and f"under {root}." in out.splitlines()[0]
    assert "No fixed place (name their files in a config by hand):" in out
    for fmt in ("aider", "openhands", "records", "openai", "swe-agent", "trajectory-dataset"):
        assert fmt in out.splitlines()[-1]


def test_write_makes_a_config_that_snakemake_plans_for_every_project(home, tmp_path) -> None:
    root, placed = home
    work = tmp_path / "work"
    work.mkdir()
    r = grumem("--home", str(root), "--write", "cfg.yaml", cwd=work)
    assert r.returncode == 0, r.stderr
    config = yaml.safe_load((work / "cfg.yaml").read_text())
    projects = config["projects"]
    assert sorted(projects) == sorted(
        ["claude-code", "codex-cli", "gemini-cli", "anthropic-1", "anthropic-2", "mini-swe-agent"]
    )
    assert projects["codex-cli"] == {
        "transcripts": {
            "glob": f"{root}/.codex/sessions/*/*/*/rollout-*.jsonl",
            "format": "codex-cli",
        },
        "queries": str(work / "queries.yaml"),
        "labels": {"source": "judge"},
        "calibration": str(work / "calibration-codex-cli.jsonl"),
    }
    queries = yaml.safe_load((work / "queries.yaml").read_text())["queries"]
    assert [q["id"] for q in queries] == ["errors-and-fixes", "environment"]
    for name in projects:
        assert (work / f"calibration-{name}.jsonl").read_bytes() == b""
    for path in ("queries.yaml", "cfg.yaml", "calibration-anthropic-2.jsonl"):
        assert f"wrote {work / path}" in r.stdout

    # the real command, as the README shows it
    dry = snakemake(work, "--configfile", str(work / "cfg.yaml"), "-n", "all").stdout
    counts = jobs(dry)
    assert counts["export_project"] == len(projects) and counts["judge"] >= len(projects)
    for name in projects:
        assert f"results/{name}/corpus/turns.parquet" in dry
    assert counts["chunk"] >= len(projects)


def test_an_existing_config_is_kept_unless_forced_and_starters_never_replaced(home, tmp_path):
    root, _ = home
    work = tmp_path / "work"
    work.mkdir()
    (work / "cfg.yaml").write_text("mine: true\n")
    (work / "queries.yaml").write_text("queries: [{id: q, question: Mine?}]\n")
    r = grumem("--home", str(root), "--write", "cfg.yaml", cwd=work)
    assert r.returncode == 1
    assert "--write cfg.yaml: the file exists; --force replaces it" in r.stderr
    assert (work / "cfg.yaml").read_text() == "mine: true\n"
    assert not (work / "calibration-codex-cli.jsonl").exists()
    r = grumem("--home", str(root), "--write", "cfg.yaml", "--force", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "claude-code" in yaml.safe_load((work / "cfg.yaml").read_text())["projects"]
    assert (work / "queries.yaml").read_text() == "queries: [{id: q, question: Mine?}]\n"
    assert f"wrote {work / 'queries.yaml'}" not in r.stdout


def test_an_empty_home_writes_nothing(tmp_path) -> None:
    (tmp_path / "home").mkdir()
    r = grumem("--home", str(tmp_path / "home"), "--write", str(tmp_path / "cfg.yaml"))
    assert r.returncode == 1 and "no agent logs found" in r.stderr
    assert "No agent logs found." in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    r = grumem("--home", str(tmp_path / "nowhere"))
    assert r.returncode == 1 and "--home" in r.stderr and "not a directory" in r.stderr


def test_only_the_known_places_are_looked_at_and_no_transcript_is_opened(home) -> None:
    """In process, with an audit hook: every file opened under the home is reported.
    Transcripts elsewhere in the home (a download, another directory of a tool) are
    not found."""
    root, placed = home
    stray = [
        root / "Downloads" / "rollout-2025-11-03T09-14-02-x.jsonl",
        root / ".claude" / "todos" / "x.jsonl",
        root / ".codex" / "rollout-2025-11-03T09-14-02-y.jsonl",
    ]
    for p in stray:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(placed["codex-cli"][0].read_bytes())
    opened: list[str] = []
    home_prefix = str(root)

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            path = os.fsdecode(args[0])
            if path.startswith(home_prefix):
                opened.append(path)

    sys.addaudithook(hook)
    try:
        found = discover.discover(str(root), {})
    finally:
        home_prefix = "\0"  # the hook cannot be removed: make it match nothing
    assert opened == []
    files = {f.format: f.files for f in found.found}
    assert files["codex-cli"] == 2 and files["claude-code"] == 1  # no stray file counted
