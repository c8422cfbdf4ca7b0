"""`make bench-train`: seconds a step of the embedded CPU training backend (verl's own
trainer with grumem's online loop), split into verl's phases, at rollout.n 2 and 4
(a benchmark that prints figures, not a test).

    .venv-verl/bin/python scripts/bench_train.py [--steps 2] [--n 2 4] [--grammar gate]

The demo's sessions rows of one session (default the shortest, demo-03: 3 chunks,
both queries; `--rows`), from the fixtures as the export builds them, trained for
`--steps` steps at each n, with the demo's model. For every step it prints verl's
own timings (timing_s/gen: rollout generation, old_log_prob: the actor's log-probs,
update_actor: the policy update, update_weights: the weight sync to the rollout
server, step: all), the tokens of the step's training rows and tokens a second
(perf/total_num_tokens, perf/throughput), and the load average beside them (the
cores may be shared). Last, one machine-readable line a rollout.n, from the last
step (the first pays for warm-up):

    train n=<n> gen_s=<f> logprob_s=<f> update_s=<f> sync_s=<f> step_s=<f>
          tokens=<n> tokens_per_s=<f>      (one line)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rollout_row import demo_rows  # noqa: E402

from grumem.corpus.rollout_rows import write_rollout_rows  # noqa: E402
from grumem.records.rollout_row import RolloutRow  # noqa: E402
from grumem.verl.cpu_model import model_dir  # noqa: E402
from grumem.verl.training import TrainSettings, trainer_run  # noqa: E402

PHASES = {
    "gen_s": "timing_s/gen",
    "logprob_s": "timing_s/old_log_prob",
    "update_s": "timing_s/update_actor",
    "sync_s": "timing_s/update_weights",
    "step_s": "timing_s/step",
}


def split_file(path: Path, rows: list[dict], split: str) -> Path:
    rows = [{**r, "extra_info": {**r["extra_info"], "split": split}} for r in rows]
    with open(path, "wb") as f:
        write_rollout_rows(f, [RolloutRow.convert(r) for r in rows])
    return path


def bench(n: int, args: argparse.Namespace, model: Path, work: Path) -> dict[str, float] | None:
    out = work / f"n{n}"
    out.mkdir()
    every = demo_rows()
    rows = [r for r in every if r["extra_info"]["session"] == args.session][: args.rows]
    held_out = [r for r in every if r["extra_info"]["session"] != args.session][:1]
    settings = TrainSettings(
        steps=args.steps,
        batch=len(rows),
        rollouts=n,
        max_response_tokens=args.response_tokens,
        grammar=args.grammar,
        logger=(),
        # no validation: the figures are the training step's
        overrides=("trainer.test_freq=-1", "trainer.save_freq=-1", *args.override),
    )
    run = trainer_run(
        settings,
        split_file(out / "sessions-train.parquet", rows, "train"),
        split_file(out / "sessions-val.parquet", held_out, "val"),
        model,
        out,
        "bench",
        sys.executable,
    )
    argv, env = run.argv, run.env
    metrics = Path(env["VERL_FILE_LOGGER_PATH"])
    metrics.parent.mkdir(parents=True, exist_ok=True)
    env["RAY_TMPDIR"] = str(work / f"r{n}")  # short: Ray's Unix socket paths
    env.update(v.split("=", 1) for v in args.env)
    started = time.monotonic()
    with open(out / "trainer.log", "w") as log:
        code = subprocess.run(
            argv, env=env, cwd=out, stdout=log, stderr=subprocess.STDOUT
        ).returncode
    wall = time.monotonic() - started
    if code != 0:
        tail = (out / "trainer.log").read_text(errors="replace").splitlines()[-40:]
        print(f"n={n}: the trainer failed ({code}); the end of its log:", *tail, sep="\n")
        return None
    last: dict[str, float] = {}
    for line in metrics.read_text().splitlines():
        step = json.loads(line)
        m = step["data"]
        last = {k: float(m[v]) for k, v in PHASES.items()}
        last["tokens"] = float(m["perf/total_num_tokens"])
        last["tokens_per_s"] = float(m["perf/throughput"])
        phases = ", ".join(f"{k[:-2]} {last[k]:.1f} s" for k in PHASES)
        print(
            f"n={n} step {step['step']}: {phases}; {last['tokens']:.0f} tokens,"
            f" {last['tokens_per_s']:.1f} tokens/s; parse rate"
            f" {m.get('training/grumem/parse_rate/mean', float('nan')):.2f}; load"
            f" {os.getloadavg()[0]:.1f}"
        )
    print(f"n={n}: {args.steps} steps, {wall:.0f} s wall (Ray start-up and model init included)")
    return last


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--n", type=int, nargs="+", default=[2, 4], help="rollout.n values")
    p.add_argument("--session", default="demo-03-npm-peer-deps")
    p.add_argument("--rows", type=int, default=2, help="rows of the session (one a query)")
    p.add_argument("--response-tokens", type=int, default=64)
    p.add_argument("--grammar", choices=("gate",), default="gate")
    p.add_argument(
        "--override", action="append", default=[], help="a Hydra override of the trainer (again)"
    )
    p.add_argument(
        "--env", action="append", default=[], help="VAR=VALUE in the trainer's environment (again)"
    )
    args = p.parse_args(argv)
    model = model_dir()
    lines, failed = [], False
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        for n in args.n:
            last = bench(n, args, model, Path(tmp))
            if last is None:
                failed = True
                continue
            lines.append(
                f"train n={n} "
                + " ".join(f"{k}={last[k]:.1f}" for k in PHASES)
                + f" tokens={last['tokens']:.0f} tokens_per_s={last['tokens_per_s']:.1f}"
            )
    for line in lines:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
