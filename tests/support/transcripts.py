"""Shared by the tests."""

from __future__ import annotations

from pathlib import Path

from grumem.transcripts import (
    read_transcript,
)
from support.checkout import FIXTURES_DIR

T = FIXTURES_DIR / "transcripts"


CLAUDE = T / "claude-code" / "7f3c2a10-5b8e-4d2a-9c41-0e6b1d2f3a45.jsonl"


SID = "7f3c2a10-5b8e-4d2a-9c41-0e6b1d2f3a45"


MINI = T / "mini-swe-agent" / "django__django-11099.traj.json"


MINI2 = T / "mini-swe-agent" / "astropy__astropy-7746.traj.json"


SWE = T / "swe-agent" / "sympy__sympy-20590.traj"


SWE0 = T / "swe-agent" / "marshmallow-code__marshmallow-1867.traj"


SWE_STEPS = T / "swe-agent" / "trajectory-only.traj"


OPENAI = T / "openai" / "export-job.json"


OPENAI_OBJ = T / "openai" / "staging-port.json"


RECORDS = T / "records" / "pairing-notes.jsonl"


ALL = [CLAUDE, MINI, MINI2, SWE, SWE0, SWE_STEPS, OPENAI, OPENAI_OBJ, RECORDS]

# Files under fixtures/transcripts/ that are part of a store but no transcript of
# their own: each folder's SOURCES.md, the messages and parts an OpenCode session
# file names (read through it).
SIDE_FILES = ("*/SOURCES.md", "opencode/storage/message/*/*", "opencode/storage/part/*/*")


def transcript_samples() -> list[tuple[Path, str]]:
    """Every transcript under fixtures/transcripts/ with its format (its folder there)."""
    samples = []
    for p in sorted(T.rglob("*")):
        rel = p.relative_to(T)
        if p.is_file() and not any(rel.match(side) for side in SIDE_FILES):
            samples.append((p, rel.parts[0]))
    return samples


def other_samples(fmt: str) -> list[Path]:
    """The transcripts of every format but `fmt`."""
    return [p for p, f in transcript_samples() if f != fmt]


def sessions_of(path: Path, fmt: str = "auto", drop_thinking: bool = False) -> dict:
    _, sessions = read_transcript(path, fmt, drop_thinking)
    return {s.id: s for s in sessions}


def chunk_cli(out: Path, files: list[Path], fmt: str = "auto") -> str:
    """`grumem chunk --format <fmt> --out <out> <files>` as a user runs it; its stderr
    (one line per file: `<file>: <format>, <n> session(s)`, then the statistics)."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--format", fmt, "--out", str(out)]
        + [str(f) for f in files],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def chunk_with_cli(tmp_path: Path, fmt: str, *files: Path) -> tuple[str, list[Path]]:
    """`grumem chunk --format <fmt>` run as a user runs it: its stderr and the chunk
    files it wrote."""
    out = tmp_path / f"chunks-{fmt}"
    return chunk_cli(out, list(files), fmt), sorted(out.glob("*.jsonl"))


def assert_results_follow_calls(session) -> None:
    """Every tool result answers a call made earlier in its session."""
    called: dict[str, int] = {}
    for i, r in enumerate(session.records):
        for key in ("tool_call_ids", "tool_use_ids"):
            for cid in r["source"].get(key, []):
                called[cid] = i
        if r["role"] == "tool_result":
            cid = r["source"].get("tool_call_id", r["source"].get("tool_use_id"))
            assert cid in called and called[cid] < i, f"{cid} answered before it was called"
