"""Transcript format plugins (entry point group grumem.transcript_formats) and the
message of a file no format accepts.

The plugin test builds a real package and installs it with pip into a
`--target` directory under tmp_path, put on PYTHONPATH of the `grumem`
subprocesses only: the shared venv never sees it. The package carries its own
PEP 517 backend (a few lines writing the wheel), so pip needs no build
dependency from an index: no network, and no setuptools/wheel version games.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grumem.errors import UnknownFormatError
from grumem.io.chunk_files import read_chunk_file
from grumem.transcripts import FORMATS, read_transcript

BACKEND = '''
"""A minimal PEP 517 backend: the package and its entry points as a wheel."""
import base64, hashlib, zipfile
from pathlib import Path

NAME, VERSION = "grumem_fmt_notes", "0.1"
DIST = f"{NAME}-{VERSION}.dist-info"
FILES = {
    f"{DIST}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n",
    f"{DIST}/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\n"
    "Tag: py3-none-any\\n",
    f"{DIST}/entry_points.txt": "[grumem.transcript_formats]\\nnotes = grumem_fmt_notes\\n",
}

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = dict(FILES)
    files[f"{NAME}/__init__.py"] = Path("grumem_fmt_notes/__init__.py").read_text()
    record = []
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w") as z:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
            z.writestr(path, data)
        z.writestr(f"{DIST}/RECORD", "\\n".join(record + [f"{DIST}/RECORD,,"]) + "\\n")
    return name
'''

PLUGIN = '''
"""A format of plain notes: `NOTES v1` then `Q: ...` (user) and `A: ...` (assistant) lines."""
from grumem.transcripts.base import NotThisFormat, Session, record

NAME = "notes"
# where `grumem discover` looks; a notes file holds a session per `---` block
LOCATIONS = ("{XDG_DATA_HOME}/notes/*.notes",)

def count_sessions(path):
    with open(path, encoding="utf-8") as f:
        return 1 + sum(line == "---\\n" for line in f)

def detect(path, head):
    if head.text.startswith("NOTES v1\\n"):
        return True
    return NotThisFormat("the first line is not NOTES v1")

def read(path, drop_thinking):
    session = Session("notes-" + str(path).rsplit("/", 1)[-1].split(".")[0])
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f.read().splitlines()[1:], start=2):
            role = {"Q": "user", "A": "assistant"}[line[0]]
            session.records.append(record(role, line[3:], {"file": str(path), "line": n}))
    return [session]
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """A --target directory holding the pip-installed plugin package."""
    root = tmp_path_factory.mktemp("plugin")
    src = root / "src"
    (src / "grumem_fmt_notes").mkdir(parents=True)
    (src / "grumem_fmt_notes" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    (src / "notes_backend.py").write_text(textwrap.dedent(BACKEND))
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "notes_backend"\nbackend-path = ["."]\n'
    )
    target = root / "site"
    env = {**os.environ, "TMPDIR": str(root)}  # pip's build directories stay under tmp_path
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
        + ["--target", str(target), str(src)],
        check=True,
        env=env,
        capture_output=True,
    )
    assert (target / "grumem_fmt_notes-0.1.dist-info" / "entry_points.txt").is_file()
    return target


def grumem(plugin: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if plugin is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugin), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "grumem", *args], capture_output=True, text=True, env=env
    )


def test_a_pip_installed_plugin_chunks_its_files_by_auto_and_by_name(
    tmp_path: Path, plugin_path: Path
) -> None:
    notes = tmp_path / "standup.notes"
    notes.write_text("NOTES v1\nQ: what broke the build?\nA: a missing --locked flag\n")
    without = grumem(None, "chunk", "--out", str(tmp_path / "none"), str(notes))
    assert without.returncode == 1 and "  notes:" not in without.stderr  # the venv is clean
    for fmt in ("auto", "notes"):
        out = tmp_path / fmt
        proc = grumem(plugin_path, "chunk", "--format", fmt, "--out", str(out), str(notes))
        assert proc.returncode == 0, proc.stderr
        assert f"{notes}: notes, 1 session(s)" in proc.stdout + proc.stderr
        (chunk,) = read_chunk_file(out / "notes-standup.jsonl")
        assert [(r["role"], r["text"]) for r in chunk.records] == [
            ("user", "what broke the build?"),
            ("assistant", "a missing --locked flag"),
        ]


def test_plugins_are_tried_after_the_built_ins_and_named_in_the_refusals(
    tmp_path: Path, plugin_path: Path
) -> None:
    other = tmp_path / "todo.txt"
    other.write_text("buy milk\n")
    proc = grumem(plugin_path, "chunk", "--out", str(tmp_path / "o"), str(other))
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    tried = [line.split(":")[0].strip() for line in lines if line.startswith("  ")]
    assert tried == [*FORMATS, "notes"]
    assert "  notes: the first line is not NOTES v1" in lines


def test_config_validation_accepts_an_installed_plugins_format(
    tmp_path: Path, plugin_path: Path
) -> None:
    code = (
        "from grumem.config.settings import validate_config\n"
        "c = {'projects': {'p': {'queries': 'q.yaml',"
        " 'transcripts': {'glob': '*.notes', 'format': 'notes'}}}}\n"
        "validate_config(c)\n"
        "print(c['projects']['p']['transcripts']['format'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(plugin_path)}
    ok = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and ok.stdout.strip() == "notes", ok.stderr
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert bad.returncode == 1 and "transcripts.format" in bad.stderr


def test_a_file_no_format_accepts_lists_each_format_and_why_one_line_each(tmp_path: Path) -> None:
    cases = {
        "notes.txt": ("just some text\n", "claude-code: the first line is not JSON"),
        "cfg.json": ('{"a": 1}\n', "openai: the file is a JSON object, not a list of messages"),
        "empty.json": ("[]\n", "openai: the list of messages is empty"),
        "events.json": ('[{"source": "user"}]\n', "openhands: [0] is not an event"),
    }
    for name, (content, expected) in cases.items():
        f = tmp_path / name
        f.write_text(content)
        with pytest.raises(UnknownFormatError) as e:
            read_transcript(f)
        lines = str(e.value).splitlines()
        assert (
            lines[0] == f"{f}: not a transcript format grumem knows; tried, and why each refused:"
        )
        reasons = lines[1:-1]
        assert [r.split(":")[0].strip() for r in reasons] == list(FORMATS)
        assert all(len(r.split(": ", 1)[1]) > 10 for r in reasons)  # a reason, not a blank
        assert f"  {expected}" in [r[: len(expected) + 2] for r in reasons]
        assert lines[-1].startswith("Name the format with --format")


def test_discover_looks_where_a_plugin_says_and_counts_with_it(
    tmp_path: Path, plugin_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".local/share/notes").mkdir(parents=True)
    (home / ".local/share/notes/standup.notes").write_text("NOTES v1\nQ: a\n---\nQ: b\n")
    (home / ".local/share/notes/retro.notes").write_text("NOTES v1\nQ: c\n")
    proc = grumem(plugin_path, "discover", "--home", str(home))
    assert proc.returncode == 0, proc.stderr
    (row,) = [line.split() for line in proc.stdout.splitlines() if line.startswith("notes ")]
    assert row[1:3] == ["3", "2"]  # sessions (its count_sessions), files
    assert row[-1] == f"{home}/.local/share/notes/*.notes"
    without = grumem(None, "discover", "--home", str(home))
    assert "notes " not in without.stdout
