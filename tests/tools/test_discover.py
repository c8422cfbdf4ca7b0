"""`grumem discover`: the transcript fixtures placed in a fake home where each tool keeps
its logs (every format that names its places, every place it names) are found,
counted as their readers read them, sized and dated; `--write` makes a config that
the real `snakemake --configfile cfg.yaml -n all` plans for every project found, and
whose chunk jobs chunk every format's files; nothing outside the known places is
reported, no transcript is opened, and a store is only counted, read-only; the docs'
table of places says what LOCATIONS say."""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from grumem.core.locations import expand_location
from grumem.tools import discover
from grumem.transcripts import FORMATS, read_transcript
from support.checkout import REPO_ROOT
from support.fake_home import fake_home
from support.workflow import env, jobs, snakemake

WITH_PLACES = sorted(name for name, m in FORMATS.items() if getattr(m, "LOCATIONS", ()))


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


def sessions_read(path: Path, fmt: str) -> list[str]:
    """The sessions the format's reader reads from the file, those with records (a
    chunk file each; Continue's index of sessions reads as one without)."""
    _, sessions = read_transcript(path, fmt)
    return [s.id for s in sessions if s.records]


def conversations(path: Path, fmt: str) -> int:
    """What discovery counts in a file: the sessions read, but a subagent a reader
    splits off a session of the same file (`<id>-side-…`, `<id>-agent-…`), which
    discovery could count only by reading the transcript. A store's sessions are rows
    of their own, each counted."""
    ids = sessions_read(path, fmt)
    return sum(not any(i.startswith(f"{j}-") for j in ids if j != i) for i in ids)


def table(stdout: str) -> dict[str, list[list[str]]]:
    """format -> its rows in discover's table: sessions, files, size, first, last, glob."""
    rows: dict[str, list[list[str]]] = defaultdict(list)
    for line in stdout.splitlines():
        words = line.split(maxsplit=7)
        if words and words[0] in FORMATS and len(words) == 8:
            rows[words[0]].append([words[1], words[2], " ".join(words[3:5]), *words[5:]])
    return dict(rows)


# ------------------------------------------------------------------ the fake home


def test_every_format_that_names_its_places_has_fixtures_in_each(tmp_path: Path) -> None:
    """A format whose module lists LOCATIONS has its fixtures in the fake home, and
    each place it names (but an environment variable's) holds one, on Linux or macOS:
    a new format, or a new place, cannot be left out of what discovery is tested on."""
    root = tmp_path / "home"
    placed = fake_home(root)
    assert sorted(placed) == WITH_PLACES
    for name in WITH_PLACES:
        by_entry = {
            entry: {Path(p) for g in expand_location(entry, str(root), {}) for p in glob.glob(g)}
            for entry in FORMATS[name].LOCATIONS
            if "${" not in entry
        }
        for entry, files in by_entry.items():
            assert files & set(placed[name]), f"{name}: no fixture placed in {entry}"
        assert set(placed[name]) <= set().union(*by_entry.values()), name


# ------------------------------------------------------------------ what is found


def test_every_format_is_found_counted_as_read_sized_and_dated(home) -> None:
    """The printed table names every format; per format, its files are the files
    placed and its sessions those their reader reads (see conversations)."""
    root, placed = home
    r = grumem("--home", str(root))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    rows = table(out)
    assert sorted(rows) == WITH_PLACES  # the printed table names every format
    for fmt, files in placed.items():
        assert sum(int(row[1]) for row in rows[fmt]) == len(files), fmt
        counted = sum(int(row[0]) for row in rows[fmt])
        assert counted == sum(conversations(p, fmt) for p in files), fmt
    assert "counted as one session each" not in out  # every store was counted

    # per place, its own row: Codex's sessions and the ones archived from its list
    size = discover.human_size
    assert [row[:5] for row in rows["codex-cli"]] == [
        ["1", "1", size(placed["codex-cli"][1].stat().st_size), "2025-11-04", "2025-11-04"],
        ["1", "1", size(placed["codex-cli"][0].stat().st_size), "2025-11-03", "2025-11-03"],
    ]
    assert [row[5] for row in rows["codex-cli"]] == [
        f"{root}/.codex/sessions/*/*/*/rollout-*.jsonl",
        f"{root}/.codex/archived_sessions/rollout-*.jsonl",
    ]
    (gemini,) = rows["gemini-cli"]
    assert gemini[:2] == ["3", "3"] and gemini[3:5] == ["2026-05-06", "2026-09-14"]
    # Cline in VS Code on Linux, Roo Code in Cursor on macOS, Kilo Code in VSCodium,
    # Cline's CLI
    assert [row[5] for row in rows["anthropic"]] == [
        f"{root}/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks/*"
        "/api_conversation_history.json",
        f"{root}/Library/Application Support/Cursor/User/globalStorage/rooveterinaryinc.roo-cline"
        "/tasks/*/api_conversation_history.json",
        f"{root}/.config/VSCodium/User/globalStorage/kilocode.kilo-code/tasks/*"
        "/api_conversation_history.json",
        f"{root}/.cline/data/tasks/*/api_conversation_history.json",
    ]
    # stores: their sessions, not their files; Continue's index is no session
    assert [row[:2] for row in rows["opencode"]] == [["2", "1"], ["2", "1"], ["1", "1"]]
    assert [row[:2] for row in rows["cursor"]] == [["2", "1"]] + [["1", "1"]] * 4
    assert rows["continue"][0][:2] == ["3", "4"]
    assert out.startswith("Looked in ") and f"under {root}." in out.splitlines()[0]
    assert "No fixed place (name their files in a config by hand):" in out
    for fmt in ("aider", "openhands", "records", "openai", "swe-agent", "trajectory-dataset"):
        assert fmt in out.splitlines()[-1]


def test_only_the_known_places_are_looked_at_and_no_transcript_is_opened(home) -> None:
    """In process, with an audit hook: every file opened under the home is reported,
    and every SQLite connection. No file is opened; the stores are connected to,
    read-only and immutable, by their format's count alone. Transcripts elsewhere in
    the home (a download, another directory of a tool) are not found."""
    root, placed = home
    stray = [
        root / "Downloads" / "rollout-2025-11-03T09-14-02-x.jsonl",
        root / ".claude" / "todos" / "x.jsonl",
        root / ".codex" / "rollout-2025-11-03T09-14-02-y.jsonl",
        root / ".local/share/opencode/backup/opencode.db",
    ]
    for p in stray:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(placed["codex-cli"][0].read_bytes())
    opened: list[str] = []
    connected: list[str] = []
    home_prefix = str(root)

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            path = os.fsdecode(args[0])
            if path.startswith(home_prefix):
                opened.append(path)
        if event == "sqlite3.connect" and home_prefix in unquote(str(args[0])):
            connected.append(str(args[0]))

    sys.addaudithook(hook)
    try:
        found = discover.discover(str(root), {})
    finally:
        home_prefix = "\0"  # the hook cannot be removed: make it match nothing
    assert opened == []
    stores = sorted(
        str(p)
        for fmt in ("cursor", "opencode", "kilo", "goose", "zed")
        for p in placed[fmt]
        if p.suffix in (".db", ".vscdb")
    )
    assert all(c.startswith("file:") and c.endswith("?mode=ro&immutable=1") for c in connected)
    assert sorted(unquote(c[len("file:") : -len("?mode=ro&immutable=1")]) for c in connected) == (
        stores
    )
    files = defaultdict(int)
    for f in found.found:
        files[f.format] += f.files
    assert files["codex-cli"] == 2 and files["claude-code"] == 1  # no stray file counted
    assert files["opencode"] == 3


def test_a_store_being_written_is_counted_untouched_and_an_unreadable_one_said_so(
    tmp_path: Path,
) -> None:
    """Zed writing its store (a thread in its `-wal` log, not checkpointed): the count
    is the store's at its last checkpoint (discovery copies nothing to replay the
    log), and neither file changes. A file in a store's place that SQLite cannot
    read is counted as one session, and the report says only its reader could tell."""
    root = tmp_path / "home"
    store = root / ".local/share/zed/threads/threads.db"
    store.parent.mkdir(parents=True)
    store.write_bytes((REPO_ROOT / "fixtures/transcripts/zed/threads.db").read_bytes())
    writer = sqlite3.connect(store)
    try:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute(
            "INSERT INTO threads (id, summary, updated_at, data_type, data)"
            " SELECT 'new-thread', summary, updated_at, data_type, data FROM threads LIMIT 1"
        )
        writer.commit()
        wal = Path(f"{store}-wal")
        before = {p: p.read_bytes() for p in (store, wal)}
        assert before[wal]
        (found,) = discover.discover(str(root), {}).found
        assert (found.format, found.files, found.sessions, found.uncounted) == ("zed", 1, 2, 0)
        assert {p: p.read_bytes() for p in (store, wal)} == before
        assert writer.execute("SELECT count(*) FROM threads").fetchone()[0] == 3
    finally:
        writer.close()

    other = root / "Library/Application Support/Zed/threads/threads.db"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"not a database, whatever its name")
    d = discover.discover(str(root), {})
    assert [(f.sessions, f.uncounted) for f in d.found] == [(3, 0), (1, 1)]
    assert "(1 store(s) counted as one session each" in discover.report(d, str(root))


# ------------------------------------------------------------------ the config written


def write_config(root: Path, work: Path) -> tuple[dict, subprocess.CompletedProcess[str]]:
    work.mkdir()
    r = grumem("--home", str(root), "--write", "cfg.yaml", cwd=work)
    assert r.returncode == 0, r.stderr
    return yaml.safe_load((work / "cfg.yaml").read_text()), r


def test_write_makes_a_config_that_snakemake_plans_for_every_project(home, tmp_path) -> None:
    root, placed = home
    work = tmp_path / "work"
    config, r = write_config(root, work)
    projects = config["projects"]
    rows = table(r.stdout)
    # a project per place found, every format
    per_format = defaultdict(list)
    for name, p in projects.items():
        per_format[p["transcripts"]["format"]].append(name)
    assert sorted(per_format) == WITH_PLACES
    for fmt, names in per_format.items():
        assert len(names) == len(rows[fmt]), fmt
        numbered = [f"{fmt}-{i}" for i in range(1, len(names) + 1)]
        assert names == ([fmt] if len(names) == 1 else numbered)
    assert projects["codex-cli-2"] == {
        "transcripts": {
            "glob": f"{root}/.codex/archived_sessions/rollout-*.jsonl",
            "format": "codex-cli",
        },
        "queries": str(work / "queries.yaml"),
        "labels": {"source": "judge"},
        "calibration": str(work / "calibration-codex-cli-2.jsonl"),
    }
    queries = yaml.safe_load((work / "queries.yaml").read_text())["queries"]
    assert [q["id"] for q in queries] == ["errors-and-fixes", "environment"]
    for name in projects:
        assert (work / f"calibration-{name}.jsonl").read_bytes() == b""
    for path in ("queries.yaml", "cfg.yaml", "calibration-anthropic-2.jsonl"):
        assert f"wrote {work / path}" in r.stdout

    # the real command, as the docs show it
    dry = snakemake(work, "--configfile", str(work / "cfg.yaml"), "-n", "all").stdout
    counts = jobs(dry)
    assert counts["export_project"] == len(projects) and counts["judge"] >= len(projects)
    assert counts["chunk"] >= len(projects)
    planned = {name for name in projects if f"results/{name}/chunked/" in dry}
    for fmt, names in per_format.items():
        assert set(names) <= planned, f"{fmt}: not planned: {sorted(set(names) - planned)}"
        for name in names:
            assert f"results/{name}/corpus/turns.parquet" in dry


@pytest.mark.slow
def test_the_written_config_chunks_every_format_through_the_workflow(home, tmp_path) -> None:
    """The chunk jobs of every project, run by snakemake on the written config: each
    file placed is chunked by its format, a chunk file per session its reader reads
    (stores included, and the subagents a reader splits off), and redacted."""
    root, placed = home
    work = tmp_path / "work"
    config, _ = write_config(root, work)
    snakemake(work, "--configfile", str(work / "cfg.yaml"), "--until", "chunk", "--", "all")
    chunked: dict[str, set[Path]] = defaultdict(set)
    for name, project in config["projects"].items():
        fmt = project["transcripts"]["format"]
        manifests = sorted((work / "results" / name / "chunked").glob("*.json"))
        assert manifests, f"{name}: no chunk job ran"
        entries = [e for m in manifests for e in json.loads(m.read_text())["transcripts"]]
        assert sorted(e["transcript"] for e in entries) == sorted(
            glob.glob(project["transcripts"]["glob"])
        ), name
        for e in entries:
            stems = sorted(Path(c).stem for c in e["chunks"])
            assert stems == sorted(sessions_read(Path(e["transcript"]), fmt)), e["transcript"]
            assert all((work / c).is_file() for c in e["chunks"])
            chunked[fmt].add(Path(e["transcript"]))
        assert all(json.loads(m.read_text())["redaction"] for m in manifests), name
    assert {fmt: sorted(files) for fmt, files in chunked.items()} == {
        fmt: sorted(files) for fmt, files in placed.items()
    }


# ------------------------------------------------------------------ the docs' table

PLACEHOLDER_WORDS = {
    "{XDG_DATA_HOME}": ("~/.local/share", "$XDG_DATA_HOME"),
    "{XDG_CONFIG_HOME}": ("~/.config",),
    "{APP_SUPPORT}": ("~/Library/Application Support",),
    "{VSCODE_USER}": ("VS Code",),
}


def docs_rows() -> dict[str, str]:
    """docs/transcripts.md's table of formats: format -> where the tool keeps its logs."""
    text = (REPO_ROOT / "docs" / "transcripts.md").read_text(encoding="utf-8")
    return {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `([a-z-]+)` \| [^|]+ \| (.+) \|$", text, re.M)
    }


def matches_a_place(path: str, globs: list[str]) -> bool:
    """The path (a file or a directory) is one a glob matches, component by component."""
    parts = path.split("/")
    return any(
        len(g.split("/")) >= len(parts)
        and all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts, g.split("/"), strict=False))
        for g in globs
    )


@pytest.mark.parametrize("name", WITH_PLACES)
def test_the_docs_table_says_where_discovery_looks(name: str) -> None:
    """The row of a format names every place its LOCATIONS hold (their folders and
    files, the placeholders' directories, the variables that move them), and every
    path it shows under `~` is one of those places: the table and LOCATIONS are one
    account of where each tool keeps its logs."""
    row = docs_rows()[name]
    locations = FORMATS[name].LOCATIONS
    variables = {v for entry in locations for v in re.findall(r"\$\{(\w+)\}", entry)}
    for entry in locations:
        for part in re.sub(r"\$\{\w+\}", "", entry).split("/"):
            if part in PLACEHOLDER_WORDS:
                assert any(w in row for w in PLACEHOLDER_WORDS[part]), (name, part)
            elif part and part != "~" and not re.search(r"[*?\[{]", part):
                assert part in row, f"{name}: the docs' row does not name {part!r} ({entry})"
    for v in variables:
        assert f"${v}" in row, f"{name}: the docs' row does not name ${v}"
    assert set(re.findall(r"\$([A-Z_]+)", row)) <= variables | {"XDG_DATA_HOME"}, name
    globs = [g for entry in locations for g in expand_location(entry, "/HOME", {})]
    shown = [s for s in re.findall(r"`([^`]+)`", row) if s.startswith("~/")]
    for path in shown:
        concrete = re.sub(r"<[^>]+>", "x", "/HOME" + path[1:]).rstrip("/")
        assert matches_a_place(concrete, globs), f"{name}: {path} is no place of LOCATIONS"
