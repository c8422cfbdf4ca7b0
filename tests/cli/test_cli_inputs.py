"""`grumem prompts` given files that are missing, directories, or not what they should
be: one line naming the file, exit 1, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.checkout import FIXTURES_DIR

DEMO = FIXTURES_DIR / "demo"
CHUNK = DEMO / "chunks" / "demo-01-k8s-namespace.jsonl"


def prompts(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "grumem", "prompts", "--settings", json.dumps({})]
    cmd += ["--project", "demo", "--out", str(tmp_path / "p.jsonl"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_prompts_runs_on_the_demo(tmp_path: Path) -> None:
    r = prompts(tmp_path, "--queries", str(DEMO / "queries.yaml"), str(CHUNK))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize("which", ["chunks", "queries", "template"])
def test_prompts_missing_file(tmp_path: Path, which: str) -> None:
    missing = tmp_path / f"missing-{which}"
    files = {"chunks": str(CHUNK), "queries": str(DEMO / "queries.yaml"), "template": None}
    files[which] = str(missing)
    args = ["--queries", files["queries"], files["chunks"]]
    if files["template"]:
        args = ["--template", files["template"], *args]
    err = one_line_error(prompts(tmp_path, *args))
    assert str(missing) in err and "No such file or directory" in err
    assert not (tmp_path / "p.jsonl").exists()


def test_prompts_directory_where_a_file_belongs(tmp_path: Path) -> None:
    err = one_line_error(prompts(tmp_path, "--queries", str(DEMO), str(CHUNK)))
    assert f"{DEMO}: is a directory" in err
    err = one_line_error(
        prompts(
            tmp_path, "--template", str(DEMO), "--queries", str(DEMO / "queries.yaml"), str(CHUNK)
        )
    )
    assert f"{DEMO}: is a directory" in err
    # a directory of chunk files is allowed; one without any says so
    (tmp_path / "empty").mkdir()
    err = one_line_error(
        prompts(tmp_path, "--queries", str(DEMO / "queries.yaml"), str(tmp_path / "empty"))
    )
    assert "no chunks in" in err and str(tmp_path / "empty") in err
    assert not (tmp_path / "p.jsonl").exists()


def test_prompts_bad_queries_files(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("queries:\n  - id: q\n    question: déjà vu?\n".encode("latin-1"))
    err = one_line_error(prompts(tmp_path, "--queries", str(latin1), str(CHUNK)))
    assert f"{latin1}:3: not UTF-8" in err
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    err = one_line_error(prompts(tmp_path, "--queries", str(empty), str(CHUNK)))
    assert f"{empty}: empty queries file" in err and "None is not" not in err
    dup = tmp_path / "dup.yaml"
    dup.write_text("queries:\n  - {id: a, question: x}\nqueries:\n  - {id: b, question: y}\n")
    err = one_line_error(prompts(tmp_path, "--queries", str(dup), str(CHUNK)))
    assert f"{dup}:3: bad YAML: duplicate key 'queries' (first on line 1)" in err


@pytest.mark.parametrize("command", ["responses", "judge"])
def test_progress_log_cannot_be_an_input(tmp_path: Path, command: str, capsys) -> None:
    """`--log` is a progress log only; naming an input there is refused
    before anything runs, and the input keeps its bytes."""
    from grumem.cli import main

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"not": "a prompt"}\n', encoding="utf-8")
    before = prompts.read_bytes()
    if command == "responses":
        args = ["responses", "--settings", "{}", "--prompts", str(prompts)]
        args += ["--out", str(tmp_path / "out.jsonl")]
    else:
        args = ["judge", "--settings", "{}", "--project", "p", "--queries", str(prompts)]
        args += ["--out", str(tmp_path / "l.jsonl"), "--unparsed", str(tmp_path / "u.jsonl")]
    tail = [str(prompts)] if command == "judge" else []
    assert main([*args, "--log", str(prompts), *tail]) == 1
    err = capsys.readouterr().err
    assert f"--log {prompts} is also" in err and "a file of its own" in err
    assert prompts.read_bytes() == before
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "l.jsonl").exists()
