"""`grumem redact`: chunk files written by hand, copied with their secrets redacted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from grumem.core.redact import placeholder
from grumem.io.jsonl import read_jsonl
from support.workflow import env

KEY = "AKIALUULMJAGCR63WBZH"


def grumem(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grumem", "redact", *args],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )


def chunk_file(path: Path) -> bytes:
    lines = [
        {"session": "s", "index": 0, "records": [{"role": "user", "text": "hello"}], "note": 1},
        {
            "session": "s",
            "index": 1,
            "records": [{"role": "tool_result", "text": f"AWS_ACCESS_KEY_ID={KEY}"}],
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path.read_bytes()


def test_a_chunk_file_is_copied_with_its_secrets_redacted(tmp_path: Path) -> None:
    source = tmp_path / "mine.jsonl"
    before = chunk_file(source)
    r = grumem("--out", str(tmp_path / "out"), str(source))
    assert r.returncode == 0, r.stderr
    assert source.read_bytes() == before  # the input is never written
    out = list(read_jsonl(tmp_path / "out" / "mine.jsonl", "chunk"))
    assert out[0] == json.loads(before.splitlines()[0])  # other fields kept
    assert out[1]["records"][0]["text"] == f"AWS_ACCESS_KEY_ID={placeholder('aws-key', KEY)}"
    assert f"{source}: 2 chunk(s), 1 changed; redacted: aws-key 1" in r.stderr
    assert "1 chunk(s) have a new chunk_sha" in r.stderr


def test_the_output_directory_may_not_be_the_inputs(tmp_path: Path) -> None:
    source = tmp_path / "mine.jsonl"
    before = chunk_file(source)
    r = grumem("--out", str(tmp_path), str(source))
    assert r.returncode == 1 and "is its own directory" in r.stderr
    assert source.read_bytes() == before
