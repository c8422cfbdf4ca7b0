"""`make bench`: the three benchmarks, then one machine-readable line (not a test).

    .venv/bin/python scripts/bench.py [--quick]

Runs scripts/bench_rollout.py, scripts/bench_export.py and scripts/bench_dag.py
one after the other (their output passes through), reads the last line each
prints (`rollout k=v ...`, `export k=v ...`; the DAG's figures are only
printed), and ends with

    perf client_ms_per_turn=<f> efficiency=<f> prompts_ms=<f> responses_ms=<f>
    gates_ms=<f> log_ms=<f> replay_ms_per_turn=<f> export_turns_per_s=<f>
    export_rss_ratio=<f>

(one line). A part that fails, or whose last line is not its own, gives `nan`
for its figures and exit status 1, the line still printed last. `--quick`
(`make bench QUICK=1`): each bench's quick case and the DAG's smallest size,
under 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent

PERF_KEYS = (
    "client_ms_per_turn",
    "efficiency",
    "prompts_ms",
    "responses_ms",
    "gates_ms",
    "log_ms",
    "replay_ms_per_turn",
    "export_turns_per_s",
    "export_rss_ratio",
)


@dataclass(frozen=True)
class Part:
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    prefix: str | None  # the first word of its last line; None: no figures read
    keys: dict[str, str]  # its key -> the perf line's key


PARTS = (
    Part(
        "bench_rollout.py",
        (),
        ("--quick",),
        "rollout",
        {k: k for k in PERF_KEYS[:7]},
    ),
    Part(
        "bench_export.py",
        (),
        ("--quick",),
        "export",
        {"turns_per_s": "export_turns_per_s", "rss_ratio": "export_rss_ratio"},
    ),
    Part("bench_dag.py", (), ("--sizes", "1000"), None, {}),
)


def parse_line(line: str, prefix: str) -> dict[str, float] | None:
    """`prefix k=v k=v ...` as {k: float(v)}; None when the line is not that."""
    words = line.split()
    if not words or words[0] != prefix:
        return None
    figures = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            return None
        try:
            figures[key] = float(value)
        except ValueError:
            return None
    return figures


def perf_line(figures: dict[str, float]) -> str:
    """`perf k=v ...` over PERF_KEYS, in order; `nan` for a figure missing."""
    return "perf " + " ".join(f"{k}={figures.get(k, math.nan):.6g}" for k in PERF_KEYS)


def part_figures(part: Part, last_line: str | None) -> dict[str, float] | None:
    """The perf line's figures from a part's last line; None when it holds none of them."""
    if part.prefix is None:
        return {}
    parsed = parse_line(last_line or "", part.prefix)
    if parsed is None or not set(part.keys) <= set(parsed):
        return None
    return {part.keys[k]: parsed[k] for k in part.keys}


def run_part(part: Part, quick: bool) -> tuple[int, str | None]:
    """Run one bench, its output passing through; (exit status, last non-blank line)."""
    cmd = [sys.executable, str(SCRIPTS / part.script), *(part.quick if quick else part.full)]
    print(f"$ {' '.join(cmd[1:])}", flush=True)
    last = None
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if line.strip():
                last = line.strip()
    return proc.returncode, last


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="quick cases: under 3 minutes")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    figures: dict[str, float] = {}
    failed = []
    for part in PARTS:
        status, last = run_part(part, args.quick)
        got = part_figures(part, last) if status == 0 else None
        if got is None:
            failed.append(f"{part.script} (exit {status})")
        else:
            figures.update(got)
    print(f"bench total: {time.perf_counter() - started:.0f} s", flush=True)
    if failed:
        print(f"no figures from: {', '.join(failed)}", flush=True)
    print(perf_line(figures), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
