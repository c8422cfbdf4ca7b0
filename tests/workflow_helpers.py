"""Driving the real `snakemake` command on a project in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"


def demo_project(**overrides: Any) -> dict[str, Any]:
    project = {
        "chunks": str(DEMO / "chunks" / "*.jsonl"),
        "queries": str(DEMO / "queries.yaml"),
        "labels": {"source": "file", "path": str(DEMO / "labels.jsonl")},
        "calibration": str(DEMO / "calibration.jsonl"),
    }
    project.update(overrides)
    return project


def write_config(
    workdir: Path,
    base_url: str | None,
    projects: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
    loop: dict[str, Any] | None = None,
    **top: Any,
) -> Path:
    config = {
        "projects": projects or {"demo": demo_project()},
        "shard_size": 3,
        "llm": {
            "base_url": base_url,
            "model": "fake-model",
            "concurrency": 4,
            "timeout": 10,
            "retries": 3,
            "backoff": 0.01,
            "grammar": False,
            "max_tokens": 256,
            **(llm or {}),
        },
        "loop": {"level": "L1", "samples": 1, **(loop or {})},
        **top,
    }
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), e.get("PATH", "")])
    return e


def snakemake(
    workdir: Path, *args: str, check: bool = True, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env(), **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    return proc


def read_lines(path: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


def key_forms(key: str) -> set[bytes]:
    """Every spelling of the key a leak could take: raw, stripped, repr, bytes repr,
    JSON-escaped, URL-encoded (written here independently of the client's list)."""
    forms = {
        key,
        key.strip(),
        repr(key)[1:-1],
        repr(key.encode())[2:-1],
        json.dumps(key)[1:-1],
        quote(key, safe=""),
        quote_plus(key),
    }
    return {f.encode() for f in forms}


def assert_no_secret(
    work: Path,
    key: str,
    *outputs: str,
    under: tuple[str, ...] = ("results", "logs", ".snakemake"),
) -> int:
    """No form of the key in any file under `under` (directories of `work`; "." is all
    of it), nor in the command's output; returns how many files were read."""
    files = [f for sub in under for f in files_under(work / sub)]
    forms = key_forms(key)
    for f in files:
        data = f.read_bytes()
        for form in forms:
            assert form not in data, f"{form!r} in {f}"
    for text in outputs:
        for form in forms:
            assert form not in text.encode(), f"{form!r} in the command's output"
    return len(files)
