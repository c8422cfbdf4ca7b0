"""Benchmark the dry run (DAG build) on a folder of small transcripts (not a test).

    .venv/bin/python scripts/bench_dag.py [--sizes 1000,10000,100000] [--quick]
        [--shard-rule sorted|stable] [--snakefile OTHER/Snakefile]

For each N, generates N small transcripts (6 records each, the `records`
format) and a project with `shard_size: 50` in a temporary directory, runs
`snakemake -n all` on it in a fresh process, and prints the number of jobs,
the wall time, CPU time and that process's peak RSS, and the ratios to the
previous size. `--quick` runs N = 1,000 only. `--snakefile` times another
checkout's workflow (before/after). The temporary directory is removed.

Machine-readable lines (for `make bench`): one per size,
`dag n=<N> jobs=<J> wall_s=<f> rss_mb=<f> cpu_s=<f>`, and last
`dag wall_s_max=<f> rss_mb_max=<f> growth=<f>`, growth being the wall time of
the largest size over that of the size before it (nan for a single size).
rss_mb is in MiB.

The target: 100,000 transcripts in <= 60 s and <= 1 GB, growth from 10,000 to
100,000 <= 12x (a linear DAG build grows 10x).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = (1_000, 10_000, 100_000)
QUICK = (1_000,)
SHARD_SIZE = 50
ROLES = ("system", "user", "assistant", "tool_result", "assistant", "user")


def write_transcripts(folder: Path, n: int) -> None:
    folder.mkdir(parents=True)
    for i in range(n):
        lines = [
            json.dumps({"role": role, "text": f"session {i}, record {r}: the build failed"})
            for r, role in enumerate(ROLES)
        ]
        (folder / f"session-{i:06d}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_project(work: Path, n: int, shard_rule: str = "stable") -> Path:
    """A project of n transcripts; its labels and calibration exist (empty):
    a dry run only needs the inputs no rule makes to be there."""
    write_transcripts(work / "transcripts", n)
    (work / "queries.yaml").write_text(
        json.dumps({"queries": [{"id": "q", "question": "What failed?"}]}), encoding="utf-8"
    )
    for name in ("labels.jsonl", "calibration.jsonl"):
        (work / name).write_text("", encoding="utf-8")
    config = {
        "projects": {
            "bench": {
                "transcripts": {"glob": str(work / "transcripts" / "*.jsonl")},
                "queries": str(work / "queries.yaml"),
                "labels": {"source": "file", "path": str(work / "labels.jsonl")},
                "calibration": str(work / "calibration.jsonl"),
            }
        },
        "shard_size": SHARD_SIZE,
        "shard_rule": shard_rule,
        "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "bench-model"},
    }
    path = work / "config.yaml"
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    return path


def dry_run(snakefile: Path, work: Path, config: Path) -> dict:
    """`snakemake -n all` in a fresh process: wall time, peak RSS, job count."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile)]
    cmd += ["-d", str(work), "--configfile", str(config), "--cores", "2", "-n", "all"]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    out_path = work / "dry-run.out"
    with open(out_path, "w", encoding="utf-8") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            # wait4: this child's own rusage, not the maximum over every child so far
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted: stop the dry run too
            proc.kill()
            proc.wait()
            raise
        seconds = time.perf_counter() - t0
    text = out_path.read_text(encoding="utf-8", errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"snakemake -n failed in {work}:\n{text[-4000:]}")
    total = re.search(r"^total\s+(\d+)\s*$", text, re.MULTILINE)
    return {
        "jobs": int(total.group(1)) if total else None,
        "seconds": seconds,
        # CPU time: the wall time on a shared machine also counts the others' jobs
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": usage.ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=SIZES,
        help="comma-separated transcript counts (default: 1000,10000,100000)",
    )
    ap.add_argument("--quick", action="store_true", help="N = 1,000 only")
    ap.add_argument("--shard-rule", choices=("sorted", "stable"), default="stable")
    ap.add_argument("--snakefile", type=Path, default=REPO / "Snakefile")
    args = ap.parse_args()
    # a SIGTERM unwinds like Ctrl-C, so the temporary directory is removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = QUICK if args.quick else args.sizes
    base = Path(tempfile.mkdtemp(prefix="grumem-bench-dag-"))
    results: list[dict] = []
    try:
        previous = None
        for n in sizes:
            work = base / f"n{n}"
            work.mkdir()
            t0 = time.perf_counter()
            config = write_project(work, n, args.shard_rule)
            generated = time.perf_counter() - t0
            r = dry_run(args.snakefile.resolve(), work, config)
            shutil.rmtree(work)
            line = (
                f"{n:>7} transcripts: {r['jobs']} jobs, snakemake -n {r['seconds']:7.1f} s"
                f" ({r['cpu_seconds']:.1f} s CPU),"
                f" peak RSS {r['peak_rss_mib']:5.0f} MiB (generated in {generated:.1f} s)"
            )
            if previous:
                line += (
                    f" | x{n / previous['n']:g} transcripts:"
                    f" time x{r['seconds'] / previous['seconds']:.1f}"
                    f" (CPU x{r['cpu_seconds'] / previous['cpu_seconds']:.1f}),"
                    f" RSS x{r['peak_rss_mib'] / previous['peak_rss_mib']:.2f}"
                )
            print(line, flush=True)
            print(
                f"dag n={n} jobs={r['jobs']} wall_s={r['seconds']:.2f}"
                f" rss_mb={r['peak_rss_mib']:.1f} cpu_s={r['cpu_seconds']:.2f}",
                flush=True,
            )
            previous = {"n": n, **r}
            results.append(previous)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    growth = results[-1]["seconds"] / results[-2]["seconds"] if len(results) > 1 else float("nan")
    print(
        f"dag wall_s_max={max(r['seconds'] for r in results):.2f}"
        f" rss_mb_max={max(r['peak_rss_mib'] for r in results):.1f} growth={growth:.2f}"
    )


if __name__ == "__main__":
    main()
