"""Benchmark the corpus export on a generated log (not a test).

    .venv/bin/python scripts/bench_export.py [--turns 1000000] [--quick]
        [--keep DIR] [--profile FILE]

Generates (streaming) a synthetic log of N turns with realistic request and
response bodies, labels, calibration and kappa.json in a temporary
directory, then runs `grumem export` on it in a fresh process and prints
turns/s (wall clock, and per CPU second: on a shared machine the wall clock
measures the neighbours too) and that process's peak RSS. It does the same at N/10 first: the
export streams the log (one trajectory in memory at a time), so peak memory
must not grow with N. `--quick` is 20k and 200k turns.

`--keep DIR` works in DIR and keeps it; a later run with the same DIR reuses
the inputs generated there (a 1M-turn log takes minutes to write).
`--profile FILE` runs the larger export under cProfile, writes the stats to
FILE and prints their top lines (the timing then includes the profiler).

The last line is for `make bench` to parse:
`export turns_per_s=<float> rss_ratio=<float>` (the larger run's turns/s,
its peak RSS over the smaller run's).

The labels are held fixed (a pool of sessions and queries, with the sample
count growing with N), so the comparison measures the stream, not the label
dictionary, which the export holds in full by design.
"""

from __future__ import annotations

import argparse
import json
import pstats
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grumem.core.chunk_text import chunk_sha, render_records
from grumem.core.json_text import dumps, sha256_text
from grumem.core.template import fill, memory_text
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_template
from grumem.llm.request import build_body, request_sha

TURNS_PER_TRAJECTORY = 20
SESSIONS = 200
QUERIES = 5
MODEL = "bench-model"
WORDS = [
    "kubectl",
    "pods",
    "namespace",
    "migration",
    "alembic",
    "lock",
    "postgres",
    "deploy",
    "service",
    "restart",
    "error",
    "config",
    "path",
    "version",
    "flag",
    "cluster",
    "node",
    "disk",
    "memory",
    "token",
    "cache",
    "retry",
    "timeout",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _sessions(rng: random.Random) -> list[list[list[dict]]]:
    roles = ("user", "assistant", "tool_result")
    return [
        [
            [{"role": roles[i % 3], "text": _text(rng, 40)} for i in range(3)]
            for _ in range(TURNS_PER_TRAJECTORY)
        ]
        for _ in range(SESSIONS)
    ]


def generate(out: Path, turns: int, seed: int = 0) -> dict[str, int]:
    """Write chunks, queries, log, labels and calibration under `out`, streaming."""
    rng = random.Random(seed)
    template = load_template(GRU_MEM_TEMPLATE)
    sessions = _sessions(rng)
    texts = [[render_records(c) for c in s] for s in sessions]
    shas = [[chunk_sha(c) for c in s] for s in sessions]
    questions = [f"Question {q}: " + _text(rng, 12) for q in range(QUERIES)]
    evidence = {
        (q, sha): rng.random() < 0.2 for q in range(QUERIES) for session in shas for sha in session
    }
    # kappa checks calibration pairs against the project's queries and chunks
    with open(out / "chunks.jsonl", "w", encoding="utf-8") as f:
        for s, session in enumerate(sessions):
            for i, records in enumerate(session):
                f.write(dumps({"session": f"s{s}", "index": i, "records": records}) + "\n")
    with open(out / "queries.yaml", "w", encoding="utf-8") as f:
        f.write(
            dumps({"queries": [{"id": f"q{q}", "question": x} for q, x in enumerate(questions)]})
        )
    with (
        open(out / "labels.jsonl", "w", encoding="utf-8") as lf,
        open(out / "calibration.jsonl", "w", encoding="utf-8") as cf,
    ):
        for (q, sha), ev in evidence.items():
            lf.write(
                dumps({"query_id": f"q{q}", "chunk_sha": sha, "evidence": ev, "annotator": "bench"})
                + "\n"
            )
            cal = ev if rng.random() < 0.95 else not ev
            cf.write(
                dumps(
                    {
                        "query_id": f"q{q}",
                        "chunk_sha": sha,
                        "evidence": cal,
                        "annotator": "bench-cal",
                    }
                )
                + "\n"
            )
    written = 0
    with open(out / "log.jsonl", "w", encoding="utf-8") as f:
        k = 0
        while written < turns:
            q, s, sample = k % QUERIES, (k // QUERIES) % SESSIONS, k // (QUERIES * SESSIONS)
            k += 1
            tid = f"bench/q{q}/s{s}/{sample}"
            memory = None
            for t in range(1, min(TURNS_PER_TRAJECTORY, turns - written) + 1):
                user = fill(
                    template,
                    {
                        "prompt": questions[q],
                        "memory": memory_text(memory),
                        "chunk": texts[s][t - 1],
                    },
                )
                body = build_body(
                    MODEL,
                    [{"role": "user", "content": user}],
                    {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512, "seed": sample},
                )
                parsed = rng.random() < 0.97
                update, end = rng.random() < 0.3, rng.random() < 0.1
                candidate, think = _text(rng, 30), _text(rng, 25)
                content = _text(rng, 30)  # an answer that does not parse
                if parsed:
                    content = (
                        f"<think>{think}</think>\n<check>{'yes' if update else 'no'}"
                        f"</check>\n<update>{candidate}</update>\n"
                        f"<next>{'end' if end else 'continue'}</next>"
                    )
                rbody = dumps(
                    {
                        "id": f"c{written}",
                        "object": "chat.completion",
                        "model": MODEL,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content},
                            }
                        ],
                    }
                )
                after = candidate if parsed and update else memory
                f.write(
                    dumps(
                        {
                            "trajectory_id": tid,
                            "project": "bench",
                            "query_id": f"q{q}",
                            "session": f"s{s}",
                            "sample": sample,
                            "level": "L1",
                            "model": MODEL,
                            "t": t,
                            "chunk_sha": shas[s][t - 1],
                            "status": "ok",
                            "abort": None,
                            "asks": 1,
                            "earlier_asks": [],
                            "memory_before": memory,
                            "memory_after": after,
                            "request": {"body": body, "sha256": request_sha(body)},
                            "response": {
                                "attempt": 1,
                                "status": 200,
                                "body": rbody,
                                "sha256": sha256_text(rbody),
                                "latency_s": 0.5,
                                "error": None,
                            },
                            "content": content,
                            "finish_reason": "stop",
                            "parsed": parsed,
                            "update_gate": update if parsed else None,
                            "exit_gate": end if parsed else None,
                            "candidate": candidate if parsed else None,
                            "think": think if parsed else None,
                            "parse_error": None
                            if parsed
                            else {"tag": "think", "reason": "missing", "raw": content},
                        }
                    )
                    + "\n"
                )
                memory = after
                written += 1
    return {"turns": written, "labels": len(evidence)}


def run_export(work: Path, profile: str | None = None) -> dict:
    """The export in a fresh process, so its peak RSS is its own."""
    code = (
        "import cProfile, json, resource, shutil, sys, time\n"
        "from grumem.stages.export import ExportInputs, export\n"
        "w, prof = sys.argv[1], sys.argv[2]\n"
        "shutil.rmtree(w + '/corpus', ignore_errors=True)\n"
        "inputs = ExportInputs(log=w + '/log.jsonl', labels=w + '/labels.jsonl',"
        " kappa=w + '/kappa.json', out_dir=w + '/corpus')\n"
        "p = cProfile.Profile() if prof else None\n"
        "t0 = time.perf_counter()\n"
        "s = p.runcall(export, inputs) if p else export(inputs)\n"
        "dt = time.perf_counter() - t0\n"
        "u = resource.getrusage(resource.RUSAGE_SELF)\n"
        "p and p.dump_stats(prof)\n"
        "print(json.dumps({'turns': s.turns, 'seconds': dt, 'peak_rss_kib': u.ru_maxrss,"
        " 'cpu_s': u.ru_utime + u.ru_stime}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(work), profile or ""], capture_output=True, text=True
    )
    if out.returncode != 0:
        sys.exit(f"export failed (exit {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout)


def bench(turns: int, work: Path, profile: str | None = None) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    stamp = work / "generated.json"
    t0 = time.perf_counter()
    if stamp.exists():
        info = json.loads(stamp.read_text())
    else:
        info = generate(work, turns)
        stamp.write_text(json.dumps(info))
    gen_s = time.perf_counter() - t0
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grumem.cli",
            "kappa",
            "--labels",
            str(work / "labels.jsonl"),
            "--calibration",
            str(work / "calibration.jsonl"),
            "--queries",
            str(work / "queries.yaml"),
            "--chunks",
            str(work / "chunks.jsonl"),
            "--out",
            str(work / "kappa.json"),
        ],
        check=True,
        capture_output=True,
    )
    r = run_export(work, profile)
    sizes = {p.name: p.stat().st_size for p in (work / "corpus").iterdir()}
    return {
        **r,
        "labels": info["labels"],
        "generate_s": gen_s,
        "log_bytes": (work / "log.jsonl").stat().st_size,
        "corpus_bytes": sizes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="20k and 200k turns")
    ap.add_argument("--keep", help="work in this directory and keep it (default: a temp dir)")
    ap.add_argument("--profile", help="cProfile the larger export into this file")
    args = ap.parse_args()
    turns = 200_000 if args.quick else args.turns
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="grumem-bench-"))
    try:
        results = []
        for n in (max(turns // 10, 1), turns):
            r = bench(n, base / f"n{n}", args.profile if n == turns else None)
            if not args.keep:
                shutil.rmtree(base / f"n{n}")
            results.append(r)
            print(
                f"{r['turns']:>9} turns: {r['turns'] / r['seconds']:8.0f} turns/s"
                f" ({r['seconds']:.1f} s; CPU {r['cpu_s']:.1f} s, {r['turns'] / r['cpu_s']:.0f}"
                f" turns/CPU-s), peak RSS {r['peak_rss_kib'] / 1024:.0f} MiB"
                f" | log {r['log_bytes'] / 2**20:.0f} MiB, labels {r['labels']},"
                f" generated in {r['generate_s']:.1f} s",
                flush=True,
            )
        small, big = results
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ratio = big["peak_rss_kib"] / small["peak_rss_kib"]
        print(f"peak RSS ratio (N vs N/10): {ratio:.2f}; this (generating) process: {own:.0f} MiB")
        if args.profile:
            pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)
        print(f"export turns_per_s={big['turns'] / big['seconds']:.1f} rss_ratio={ratio:.3f}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
