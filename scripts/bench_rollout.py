"""Benchmark the responses stage against a server's capacity (not a test).

    .venv/bin/python scripts/bench_rollout.py [--quick] [--profile FILE] [--keep DIR]

1. Generates a project (N sessions of T chunks, one chunk file per session,
   one query) in a temporary directory and starts the fake LLM server
   (tests/support, through its harness) as a subprocess with a capacity
   model: R tokens/s shared equally by the requests in flight, at most r
   tokens/s each, completion lengths drawn from a fixed-seed lognormal
   capped at 2048 tokens.
2. Live run: the prompts stage's `plan` builds the prompt records, then
   `grumem.stages.responses.run_shard` runs all N trajectories in this process through
   one `LLMClient` (at most `--concurrency` requests in flight).
3. Prints turns, wall time, turns/s, the mean of the client's requests in
   flight (sampled on its event loop, time-weighted), CPU per turn of client
   and server, and the efficiency: ideal time / measured time, where the
   ideal is (a) the total completion tokens / R and (b) the free-running
   schedule's simulated time for the very same token counts (read back from
   the recorded responses): processor sharing at min(r, R/n), each
   trajectory a chain of requests, at most `concurrency` in flight (the
   schedule the responses stage runs, with the client's cap).
4. Workflow overhead: the same N x T turns again through the real
   `snakemake` command (prompts, responses, gates, log) in replay mode,
   every answer served from the cache the live run filled; wall time and
   cost per turn. A replay miss fails the run, so the cache keys are proven
   to match.

The last line, read by scripts/bench.py (`make bench`), is
`rollout client_ms_per_turn=<f> efficiency=<f> prompts_ms=<f> responses_ms=<f>
gates_ms=<f> log_ms=<f> replay_ms_per_turn=<f>`: the client's CPU per turn, the
efficiency against the free-running schedule, each offline rule's job ms per
turn in the replay, and the replay's wall ms per turn (`nan` without it).
`--profile FILE` runs the live part under cProfile (CPU time) and prints the
top functions (what holds the client back when the efficiency is low). The
client's start-up (importing the SDK, building its client) is reported apart
from its CPU per turn, and the load average beside it: the cores are shared.
`--floor` also measures the transport floor: the client CPU per request of
the SDK's raw post over its own aiohttp client, of the recording client's SDK
path (the same post over grumem.llm.transport) and of bare aiohttp, POSTing
the same bodies to a fake server that answers at once.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import heapq
import io
import json
import math
import os
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grumem.config.settings import settings_from_json
from grumem.core.json_text import dumps
from grumem.core.loop import user_message
from grumem.core.template import Budget, PromptBuilder
from grumem.io.jsonl import validate
from grumem.io.tokenizer import cl100k_tokens
from grumem.llm.client import LLMClient
from grumem.llm.request import build_body, sampling_params
from grumem.records.prompt import PromptRecord
from grumem.records.response import ExchangeRecord, ResponseRecord
from grumem.stages.prompts import plan
from grumem.stages.responses import LoopSettings, Progress, run_shard

REPO = Path(__file__).resolve().parents[1]
# the fake server and its process harness are test support (tests/support), not the package
sys.path.insert(0, str(REPO / "tests"))
from support.harness import start_fake_server  # noqa: E402

PROJECT = "bench"
MODEL = "fake-model"
QUESTION = "Which errors did the agent hit, and what fixed each one?"
# the fake server remembers a section that shows an error or a fix: about a
# third of the turns update the memory, so prompts change along a trajectory
CHECK_IF = r"(?i)\b(error|failed|fixed)\b"
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
    "build",
    "test",
    "module",
    "import",
    "request",
    "handler",
    "queue",
    "worker",
]
EVENTS = ("error", "failed", "fixed")


@dataclass(frozen=True)
class Case:
    trajectories: int
    turns: int
    concurrency: int
    rate: float  # R: tokens/s shared by the requests in flight
    per_request: float  # r: tokens/s of one request at most
    mu: float  # lognormal completion length: median e^mu tokens
    sigma: float
    cap: int
    seed: int
    shard_size: int  # chunk files (= trajectories) per snakemake shard job


FULL = Case(1000, 20, 256, 50_000, 2000, math.log(350), 0.8, 2048, 7, 100)
QUICK = Case(80, 10, 64, 20_000, 2000, math.log(350), 0.8, 2048, 7, 80)


# ------------------------------------------------------------------ the project


def chunk_records(rng: random.Random, session: str, turns: int) -> list[dict]:
    """One session's chunks: three records each, some mentioning an error or a fix."""
    out = []
    for index in range(turns):
        event = rng.choice(EVENTS) if rng.random() < 0.3 else None
        records = []
        for role in ("user", "assistant", "tool_result"):
            words = [rng.choice(WORDS) for _ in range(rng.randint(30, 120))]
            if event and role == "tool_result":
                words.insert(rng.randint(0, 5), event)
            records.append({"role": role, "text": " ".join(words)})
        out.append({"session": session, "index": index, "records": records})
    return out


def write_project(root: Path, case: Case) -> tuple[list[Path], Path]:
    """Chunk files (one per session) and a queries file under `root`."""
    rng = random.Random(case.seed)
    chunk_dir = root / "chunks"
    chunk_dir.mkdir(parents=True)
    files = []
    for i in range(case.trajectories):
        session = f"s{i:05d}"
        path = chunk_dir / f"{session}.jsonl"
        # plain writes: write_jsonl's fsync per file would dominate the set-up
        with open(path, "w", encoding="utf-8") as f:
            for rec in chunk_records(rng, session, case.turns):
                validate(rec, "chunk", path)
                f.write(dumps(rec) + "\n")
        files.append(path)
    queries = root / "queries.yaml"
    queries.write_text(
        yaml.safe_dump({"queries": [{"id": "errors", "question": QUESTION}]}), encoding="utf-8"
    )
    return files, queries


def server_script(case: Case) -> dict[str, Any]:
    return {
        "model": MODEL,
        "replies": [{"match": "<section>", "gate": {"check_if": CHECK_IF}}],
        "capacity": {
            "tokens_per_s": case.rate,
            "per_request_tps": case.per_request,
            "completion_tokens": {
                "dist": "lognormal",
                "mu": case.mu,
                "sigma": case.sigma,
                "cap": case.cap,
                "seed": case.seed,
            },
        },
    }


def llm_section(case: Case, cache_dir: Path, mode: str, base_url: str | None) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "model": MODEL,
        "max_tokens": case.cap,
        "concurrency": case.concurrency,
        "timeout": 600,
        "retries": 0,  # a failure is a bench failure, not something to absorb
        "grammar": False,
        "mode": mode,
        "cache_dir": str(cache_dir),
    }


# ------------------------------------------------------------------ the ideal


@dataclass(frozen=True)
class Schedule:
    seconds: float
    mean_in_flight: float


def simulate_free(
    chains: list[list[int]], rate: float, per_request: float, concurrency: int
) -> Schedule:
    """The free-running schedule of `chains` (completion tokens per turn, per trajectory).

    Processor sharing: every request in flight decodes at min(per_request,
    rate / n). Each trajectory has at most one request in flight and sends its
    next turn the moment the last is answered; at most `concurrency` are in
    flight, the others wait in FIFO order (the client's semaphore). Exact and
    O(log n) per event: all jobs in flight run at one speed, so a job ends when
    the service every job has received since time 0 (`served`) reaches its
    start value plus its tokens.
    """
    step = [0] * len(chains)
    waiting = deque(i for i, c in enumerate(chains) if c)
    running: list[tuple[float, int]] = []  # (served at which it ends, trajectory)
    served = now = area = 0.0

    def admit() -> None:
        while waiting and len(running) < concurrency:
            i = waiting.popleft()
            heapq.heappush(running, (served + chains[i][step[i]], i))

    admit()
    while running:
        n = len(running)
        speed = min(per_request, rate / n)
        end = running[0][0]
        dt = (end - served) / speed
        now += dt
        area += n * dt
        served = end
        while running and running[0][0] <= served * (1 + 1e-12):
            _, i = heapq.heappop(running)
            step[i] += 1
            if step[i] < len(chains[i]):
                waiting.append(i)
        admit()
    return Schedule(now, area / now if now else 0.0)


# ------------------------------------------------------------------ the live run


@dataclass(frozen=True)
class Live:
    turns: int
    seconds: float
    tokens: int
    chains: list[list[int]]
    mean_in_flight: float
    in_flight_max: int
    client_cpu: float
    server_cpu: float
    client_startup_cpu: float


class InFlight:
    """Time-weighted mean of the client's requests in flight, sampled on its event loop.

    (The recorded attempt latencies cannot give it by Little's law: they
    include the wait for a slot of the client's semaphore.)"""

    def __init__(self, client: LLMClient, every: float = 0.005):
        self.client, self.every = client, every
        self.area = self.seconds = 0.0

    async def sample(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.every)
            now = time.perf_counter()
            self.area += self.client.counters.in_flight * (now - last)
            self.seconds += now - last
            last = now

    def mean(self) -> float:
        return self.area / self.seconds if self.seconds else 0.0


def completion_tokens(record: ExchangeRecord) -> int:
    return json.loads(record.response.body or "")["usage"]["completion_tokens"]


def plan_prompts(
    llm: dict[str, Any], chunk_files: list[Path], queries: Path
) -> tuple[LoopSettings, list[PromptRecord]]:
    """The loop's settings and the prompt records of the bench's project."""
    settings = settings_from_json(json.dumps({"llm": llm}))
    builder = PromptBuilder(
        (REPO / "templates" / "gru-mem.txt").read_text(encoding="utf-8"),
        None,
        Budget.from_config(settings["budget"]),
        tokens=cl100k_tokens(),
    )
    q = yaml.safe_load(queries.read_text(encoding="utf-8"))["queries"]
    prompts = [
        PromptRecord.convert(p) for p in plan(PROJECT, [str(f) for f in chunk_files], q, builder, 1)
    ]
    return LoopSettings.from_settings(settings), prompts


def live_run(
    case: Case, chunk_files: list[Path], queries: Path, workdir: Path, profile: str | None
) -> Live:
    server = start_fake_server(server_script(case), workdir)
    try:
        llm = llm_section(case, workdir / "cache", "live", server.base_url)
        s, prompts = plan_prompts(llm, chunk_files, queries)
        progress = Progress(len(prompts), "live", [sys.stderr])
        # the client's start-up (importing the SDK, building its client) is paid once
        # a job, not a turn: measured apart
        startup0 = time.process_time()
        client = LLMClient.from_config(s.llm)
        startup = time.process_time() - startup0
        server_cpu0, cpu0 = server.cpu_seconds(), time.process_time()
        # CPU time, not wall time: what the client costs, not what it waits for
        profiler = cProfile.Profile(time.process_time) if profile else None

        async def go() -> tuple[list[ResponseRecord], float, InFlight]:
            async with client:
                in_flight = InFlight(client)
                sampler = asyncio.create_task(in_flight.sample())
                start = time.perf_counter()
                try:
                    records = await run_shard(client, prompts, s, progress, report_every=10.0)
                finally:
                    sampler.cancel()
                return records, time.perf_counter() - start, in_flight

        if profiler:
            profiler.enable()
        records, seconds, in_flight = asyncio.run(go())
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
        client_cpu, server_cpu = time.process_time() - cpu0, server.cpu_seconds() - server_cpu0
    finally:
        server.stop()
    exchanges = [r for r in records if isinstance(r, ExchangeRecord)]
    bad = [r for r in records if not isinstance(r, ExchangeRecord) or r.response.status != 200]
    if bad:
        raise SystemExit(f"the live run did not answer every turn: {bad[0]}")
    chains: dict[str, list[int]] = {}
    for r in exchanges:
        chains.setdefault(r.trajectory_id, []).append(completion_tokens(r))
    return Live(
        len(exchanges),
        seconds,
        sum(map(sum, chains.values())),
        list(chains.values()),
        in_flight.mean(),
        in_flight.client.counters.in_flight_max,
        client_cpu,
        server_cpu,
        startup,
    )


def print_profile(path: str, top: int = 25) -> None:
    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    print(out.getvalue())


# ------------------------------------------------------------------ the transport floor


def floor_bodies(case: Case, chunk_files: list[Path], queries: Path, n: int) -> list[bytes]:
    """The first `n` first-turn request bodies of the bench's plan (real sizes)."""
    s, prompts = plan_prompts(llm_section(case, Path("."), "live", "x"), chunk_files, queries)
    bodies = []
    for turn in prompts[:n]:
        messages = [{"role": "user", "content": user_message(turn, None)}]
        bodies.append(build_body(MODEL, messages, sampling_params(s.llm, 0)).encode("utf-8"))
    return bodies


def transport_floor(workdir: Path, bodies: list[bytes], concurrency: int) -> dict[str, float]:
    """Client CPU (ms) per request of three ways to POST the same bodies to the same
    fake server, which answers at once: the SDK's raw post (AsyncOpenAI over
    DefaultAioHttpClient, `post(cast_to=httpx2.Response)`), the recording client's
    SDK path (the same post over grumem.llm.transport, its body cap set), and bare
    aiohttp. Only the HTTP exchange: no cache, no records, no parsing."""
    import aiohttp
    import httpx2
    import openai

    from grumem.llm.transport import RESPONSE_CAP, response_cap, sdk_client

    reply = "<think>x</think>\n<check>no</check>\n<update>m</update>\n<next>continue</next>"
    server = start_fake_server({"model": MODEL, "default": {"content": reply}}, workdir)
    url = server.base_url + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-no-key"}

    def sdk() -> Any:
        limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        http = openai.DefaultAioHttpClient(limits=limits, timeout=600)
        return openai.AsyncOpenAI(
            base_url=server.base_url, api_key="sk-no-key", max_retries=0, http_client=http
        )

    async def run(way: str) -> float:
        sem = asyncio.Semaphore(concurrency)
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
        client = (
            sdk() if way == "sdk" else sdk_client(server.base_url, "sk-no-key", 600, concurrency)
        )

        async def one(body: bytes) -> int:
            async with sem:
                if way == "sdk":
                    r = await client.post(
                        "/chat/completions", cast_to=httpx2.Response, content=body
                    )
                    return r.status_code
                if way == "grumem":
                    # what the recording client does per request: the cap from the
                    # parsed body (it parses it to check it anyway), then the post
                    token = RESPONSE_CAP.set(response_cap(json.loads(body)))
                    try:
                        r = await client.post(
                            "/chat/completions", cast_to=httpx2.Response, content=body
                        )
                    finally:
                        RESPONSE_CAP.reset(token)
                    return r.status_code
                async with session.post(url, data=body, headers=headers) as r:
                    await r.read()
                    return r.status

        try:
            await asyncio.gather(*(one(b) for b in bodies[:concurrency]))  # connections, warm
            cpu0 = time.process_time()
            statuses = await asyncio.gather(*(one(b) for b in bodies))
            cpu = time.process_time() - cpu0
        finally:
            await client.close()
            await session.close()
        if set(statuses) != {200}:
            raise SystemExit(f"transport floor: {way} got statuses {sorted(set(statuses))}")
        return 1000 * cpu / len(bodies)

    try:
        return {way: asyncio.run(run(way)) for way in ("sdk", "grumem", "aiohttp")}
    finally:
        server.stop()


# ------------------------------------------------------------------ the workflow


def workflow_replay(
    case: Case, chunk_dir: Path, queries: Path, workdir: Path
) -> tuple[float, dict[str, float], dict[str, float]]:
    """Seconds for `snakemake results/bench/log.jsonl` in replay mode from the live cache,
    and the job seconds and job CPU seconds per rule (from the rules' `benchmark:` files:
    on a loaded machine the wall seconds hold the wait for a core, the CPU ones do not)."""
    project_dir = workdir / "workflow-replay"
    project_dir.mkdir()
    config = {
        "projects": {PROJECT: {"chunks": str(chunk_dir / "*.jsonl"), "queries": str(queries)}},
        "shard_size": case.shard_size,
        "llm": llm_section(case, workdir / "cache", "replay", None),
    }
    (project_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    target = f"results/{PROJECT}/log.jsonl"
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    cmd += ["-d", str(project_dir), "--cores", "2", target]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"snakemake replay failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    with open(project_dir / target, encoding="utf-8") as f:
        lines = sum(1 for _ in f)
    if lines != case.trajectories * case.turns:
        raise SystemExit(f"replay log has {lines} turns, expected {case.trajectories * case.turns}")
    per_rule: dict[str, float] = {}
    cpu_per_rule: dict[str, float] = {}
    for tsv in sorted((project_dir / "benchmarks").rglob("*.tsv")):
        rule = tsv.relative_to(project_dir / "benchmarks").parts[0]
        header, first = (line.split("\t") for line in tsv.read_text("utf-8").splitlines()[:2])
        row = dict(zip(header, first, strict=True))
        per_rule[rule] = per_rule.get(rule, 0.0) + float(row["s"])
        cpu_per_rule[rule] = cpu_per_rule.get(rule, 0.0) + float(row["cpu_time"])
    order = ["prompts", "responses", "gates", "log"]

    def ordered(d: dict[str, float]) -> dict[str, float]:
        return dict(sorted(d.items(), key=lambda kv: (order + [kv[0]]).index(kv[0])))

    return seconds, ordered(per_rule), ordered(cpu_per_rule)


# ------------------------------------------------------------------ main

# the last line, read by scripts/bench.py: job ms per turn of each offline rule
# (its `benchmark:` seconds summed over its jobs), and the replay's wall ms per turn
SUMMARY_KEYS = (
    "client_ms_per_turn",
    "efficiency",
    "prompts_ms",
    "responses_ms",
    "gates_ms",
    "log_ms",
    "replay_ms_per_turn",
)


def summary_line(figures: dict[str, float]) -> str:
    """`rollout k=v ...` over SUMMARY_KEYS; `nan` for a figure not measured (--no-workflow)."""
    return "rollout " + " ".join(f"{k}={figures.get(k, math.nan):.4g}" for k in SUMMARY_KEYS)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a small case (under 60 s on 2 cores)")
    p.add_argument("--trajectories", type=int, help="N (full: 1000, quick: 80)")
    p.add_argument("--turns", type=int, help="T per trajectory (full: 20, quick: 10)")
    p.add_argument("--concurrency", type=int, help="requests in flight at most")
    p.add_argument("--rate", type=float, help="R, server tokens/s")
    p.add_argument("--per-request", type=float, help="r, tokens/s per request")
    p.add_argument("--no-workflow", action="store_true", help="skip the snakemake replay")
    p.add_argument("--profile", help="cProfile the live run's client into this file")
    p.add_argument(
        "--floor",
        action="store_true",
        help="also measure the transport floor: client CPU per request of the SDK's post, "
        "the recording client's SDK path and bare aiohttp, at --concurrency",
    )
    p.add_argument("--keep", help="work in this (new) directory and keep it")
    args = p.parse_args(argv)
    base = QUICK if args.quick else FULL
    overrides = {
        "trajectories": args.trajectories,
        "turns": args.turns,
        "concurrency": args.concurrency,
        "rate": args.rate,
        "per_request": args.per_request,
    }
    case = Case(**{**base.__dict__, **{k: v for k, v in overrides.items() if v is not None}})

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="grumem-bench-"))
    workdir.mkdir(parents=True, exist_ok=bool(not args.keep))
    try:
        chunk_files, queries = write_project(workdir / "project", case)
        mean_tokens = math.exp(case.mu + case.sigma**2 / 2)
        print(
            f"case: {case.trajectories} trajectories x {case.turns} turns, "
            f"concurrency {case.concurrency}, R={case.rate:g} tokens/s, r={case.per_request:g} "
            f"tokens/s, completion tokens lognormal(median {math.exp(case.mu):.0f}, "
            f"sigma {case.sigma}, mean ~{mean_tokens:.0f}) capped at {case.cap}, seed {case.seed}"
        )
        live = live_run(case, chunk_files, queries, workdir, args.profile)
        live_load = os.getloadavg()[0]  # the 1-minute mean: the bench shares the cores
        by_rate = live.tokens / case.rate
        free = simulate_free(live.chains, case.rate, case.per_request, case.concurrency)
        print(f"turns: {live.turns}")
        print(f"completion tokens: {live.tokens} (mean {live.tokens / live.turns:.0f} per turn)")
        print(f"wall time: {live.seconds:.2f} s")
        print(f"turns/s: {live.turns / live.seconds:.1f}")
        print(
            f"mean in flight: {live.mean_in_flight:.1f} requests "
            f"(max {live.in_flight_max}; the free-running schedule: {free.mean_in_flight:.1f})"
        )
        per_turn = 1000 * live.client_cpu / live.turns
        print(
            f"CPU: client {live.client_cpu:.1f} s ({per_turn:.2f} ms/turn: one core keeps up"
            f" with at most ~{1000 / per_turn:.0f} turns/s), fake server {live.server_cpu:.1f} s"
            f" ({1000 * live.server_cpu / live.turns:.2f} ms/turn)"
        )
        print(
            f"  client start-up (SDK import and client, once a job): {live.client_startup_cpu:.2f}"
            f" s; load average during the run: {live_load:.2f} on {os.cpu_count()} cores"
        )
        print(
            f"server capacity: R / mean tokens = {case.rate * live.turns / live.tokens:.0f} turns/s"
        )
        print(f"ideal (tokens / R): {by_rate:.2f} s -> efficiency {by_rate / live.seconds:.3f}")
        print(
            f"ideal (free-running schedule, simulated): {free.seconds:.2f} s "
            f"-> efficiency {free.seconds / live.seconds:.3f}"
        )
        if args.profile:
            print_profile(args.profile)
        if args.floor:
            bodies = floor_bodies(case, chunk_files, queries, min(live.turns, 4000))
            ms = transport_floor(workdir, bodies, case.concurrency)
            print(
                f"transport floor ({len(bodies)} requests, {case.concurrency} in flight, answered "
                f"at once; client CPU per request): SDK post {ms['sdk']:.3f} ms, "
                f"grumem.llm.transport {ms['grumem']:.3f} ms, bare aiohttp {ms['aiohttp']:.3f} ms"
            )
        figures = {"client_ms_per_turn": per_turn, "efficiency": free.seconds / live.seconds}
        if not args.no_workflow:
            seconds, per_rule, cpu_per_rule = workflow_replay(
                case, chunk_files[0].parent, queries, workdir
            )
            for rule in ("prompts", "responses", "gates", "log"):
                figures[f"{rule}_ms"] = 1000 * per_rule.get(rule, math.nan) / live.turns
            figures["replay_ms_per_turn"] = 1000 * seconds / live.turns
            shards = math.ceil(case.trajectories / case.shard_size)
            print(
                f"workflow replay (snakemake prompts/responses/gates/log, {shards} shard(s), "
                f"every answer cached): {live.turns} turns in {seconds:.2f} s, "
                f"{1000 * seconds / live.turns:.2f} ms/turn"
            )
            print(
                "  job seconds per rule (summed over jobs, 2 run at a time): "
                + ", ".join(
                    f"{rule} {s:.1f} s ({1000 * s / live.turns:.2f} ms/turn)"
                    for rule, s in per_rule.items()
                )
            )
            print(
                "  job CPU seconds per rule: "
                + ", ".join(
                    f"{rule} {s:.1f} s ({1000 * s / live.turns:.2f} ms/turn)"
                    for rule, s in cpu_per_rule.items()
                )
            )
        print(f"benchmark total: {time.perf_counter() - started:.1f} s")
        print(summary_line(figures))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
