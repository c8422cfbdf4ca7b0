"""Stage `sessions`: the project's session index, one line per session with the chunk
file (and line) that holds it; a session in two files is an error naming both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem import cli
from grumem.errors import RecordError
from grumem.io.jsonl import read_jsonl
from grumem.io.session_index import read_session_index, session_index
from support.checkout import FIXTURES_DIR

CHUNKS = FIXTURES_DIR / "demo" / "chunks"


def chunk_line(session: str, index: int) -> str:
    return json.dumps({"session": session, "index": index, "records": []}) + "\n"


def test_the_demo_index_names_each_sessions_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "sessions.jsonl"
    assert cli.main(["sessions", "--out", str(out), str(CHUNKS)]) == 0
    lines = list(read_jsonl(out, "session-index"))
    files = sorted(CHUNKS.glob("*.jsonl"))
    assert [(r["file"], r["line"]) for r in lines] == [(str(f), 1) for f in files]
    assert [r["session"] for r in lines] == [f.stem for f in files]
    assert read_session_index(out) == {f.stem: str(f) for f in files}
    assert f"sessions: {len(files)} sessions indexed in {out}" in capsys.readouterr().err


def test_a_session_in_two_files_is_an_error_naming_both(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(chunk_line("s", 0) + chunk_line("t", 0))
    b.write_text(chunk_line("u", 0) + chunk_line("s", 0))
    with pytest.raises(RecordError) as e:
        list(session_index([str(a), str(b)]))
    assert (e.value.path, e.value.line, e.value.field) == (str(b), 2, "session")
    assert f"also in {a} (line 1)" in str(e.value)
