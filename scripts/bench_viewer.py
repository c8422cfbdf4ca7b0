"""Benchmark the trajectory viewer on a generated corpus (not a test).

    .venv/bin/python scripts/bench_viewer.py [--turns 2000000] [--quick] [--keep DIR]

Generates the log and exports its corpus as scripts/bench_export.py does
(20 turns a trajectory: the default is 100,000 trajectories), then runs
`grumem report-viewer` on it in a fresh process, at N/10 turns and at N, and
prints its seconds (wall and CPU), peak RSS, the page's size and how many
trajectories it shows. The page holds a bounded sample, so its size and the
process's memory must not grow with N; its time does (two passes).
`--keep DIR` works in DIR and keeps it (a later run reuses the inputs).

The last line: `viewer s_per_trajectory=<float> rss_ratio=<float> page_bytes=<int>`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_export import TURNS_PER_TRAJECTORY, bench  # noqa: E402

RUN = (
    "import json, resource, sys, time\n"
    "from grumem.report.viewer import write_viewer\n"
    "w = sys.argv[1]\n"
    "t0 = time.perf_counter()\n"
    "s = write_viewer(w + '/log.jsonl', w + '/corpus/trajectories.jsonl', None,"
    " w + '/viewer.html', 'bench')\n"
    "dt = time.perf_counter() - t0\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(json.dumps({'seconds': dt, 'cpu_s': u.ru_utime + u.ru_stime,"
    " 'peak_rss_kib': u.ru_maxrss, 'shown': s.shown, 'trajectories': s.trajectories,"
    " 'bytes': s.bytes}))\n"
)


def run_viewer(work: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, str(work)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"report-viewer failed (exit {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=100_000 * TURNS_PER_TRAJECTORY)
    ap.add_argument("--quick", action="store_true", help="20k and 200k turns")
    ap.add_argument("--keep", help="work in this directory and keep it (default: a temp dir)")
    args = ap.parse_args()
    turns = 200_000 if args.quick else args.turns
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="grumem-bench-"))
    try:
        results = []
        for n in (max(turns // 10, 1), turns):
            work = base / f"n{n}"
            if not (work / "corpus" / "trajectories.jsonl").exists():
                bench(n, work)
            r = run_viewer(work)
            results.append(r)
            print(
                f"{r['trajectories']:>7} trajectories ({n} turns): {r['seconds']:.1f} s"
                f" (CPU {r['cpu_s']:.1f} s), peak RSS {r['peak_rss_kib'] / 1024:.0f} MiB,"
                f" page {r['bytes']} bytes showing {r['shown']}",
                flush=True,
            )
        small, big = results
        ratio = big["peak_rss_kib"] / small["peak_rss_kib"]
        per = big["seconds"] / big["trajectories"]
        print(f"viewer s_per_trajectory={per:.6f} rss_ratio={ratio:.3f} page_bytes={big['bytes']}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
