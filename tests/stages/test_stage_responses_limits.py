"""Stage `responses` facing a hostile server, through the real `grumem responses` command
in a process of its own: a 400 MB body leaves its memory bounded, and a server that asks
to be retried in a day fails the job at once, naming what it asked.

The fake OpenAI server (tests/support) streams the body piece by piece without
building it; the job's peak RSS is its own (the kernel's ru_maxrss of that one
process, read by a wrapper process that runs it and nothing else).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from grumem.llm.cache import ResponseCache
from support.workflow import DEMO, REPO, env, write_config

FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"
HUGE = 400_000_000
RSS_LIMIT_MIB = 300

# runs argv[2:], then writes the peak RSS (KiB) of that child to argv[1]; its address
# space is capped at 4 GiB, so that a job reading a huge body whole fails with a
# MemoryError here instead of taking the shared machine's memory
MEASURE = """
import resource, subprocess, sys
limit = 4 << 30
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
code = subprocess.run(sys.argv[2:], preexec_fn=cap).returncode
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def demo_script(**extra: object) -> dict:
    return {**yaml.safe_load(FAKE_DEMO.read_text(encoding="utf-8")), **extra}


def grumem(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "grumem", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=timeout)


def demo_prompts(work: Path, base_url: str, **llm: object) -> tuple[Path, Path]:
    """A config (llm.concurrency 8, its default) and one shard's prompts (two demo sessions)."""
    config = write_config(
        work, base_url, llm={"cache_dir": str(work / "cache"), "concurrency": 8, **llm}
    )
    prompts = work / "prompts.jsonl"
    chunks = sorted((DEMO / "chunks").glob("*.jsonl"))[:2]
    proc = grumem(
        "prompts", "--config", str(config), "--project", "demo", "--queries",
        str(DEMO / "queries.yaml"), "--out", str(prompts), *map(str, chunks),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return config, prompts


@pytest.mark.parametrize("announced", [False, True], ids=["chunked", "content-length"])
def test_a_400_mb_body_fails_the_job_in_bounded_memory(tmp_path, fake_server, announced):
    """Every completion answered by a 400 MB 200 (a valid completion, read whole): the
    job's peak RSS stays under 300 MiB, each attempt fails with the cap in its error
    and is retried, nothing is cached or written, and the job fails naming the cap."""
    shape = {"kind": "huge_body", "bytes": HUGE, "content_length": announced}
    server = fake_server(demo_script(shapes=[shape]))
    config, prompts = demo_prompts(tmp_path, server.base_url)
    requests = sum(1 for line in prompts.open() if json.loads(line)["t"] == 1)
    out, rss_file = tmp_path / "responses.jsonl", tmp_path / "rss"
    cmd = [sys.executable, "-c", MEASURE, str(rss_file), sys.executable, "-m", "grumem"]
    t0 = time.monotonic()
    proc = subprocess.run(
        [*cmd, "responses", "--config", str(config), "--prompts", str(prompts), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    seconds = time.monotonic() - t0
    peak_mib = int(rss_file.read_text()) / 1024
    print(f"peak RSS {peak_mib:.0f} MiB, {seconds:.1f} s, {requests} first turns")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert peak_mib < RSS_LIMIT_MIB
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("grumem responses: error: every request failed: ")
    assert "response body too large: " in last and "-byte cap for this request" in last
    what = f"its Content-Length, {HUGE} bytes, is over" if announced else "bytes read are over"
    assert what in last
    assert "4 attempt(s)" in last  # retries: 3, as any failed attempt
    assert not out.exists()
    assert not list(ResponseCache(tmp_path / "cache").shas())
    stats = server.stats()
    assert stats["requests"] == 4 * requests
    # the server stopped writing once the job hung up: what the loopback sockets'
    # buffers took (a few MB an attempt), not 400 MB an attempt
    assert stats["streamed_bytes"] < stats["requests"] * 10_000_000


@pytest.mark.parametrize("status", ["429", "503"])
def test_a_server_asking_for_a_day_fails_the_job_at_once(tmp_path, fake_server, status):
    """Retry-After: 86400 on every completion: the job fails within seconds (no wait of
    the 300 s cap at every retry), one attempt a request, the value named."""
    faults = {"rate": 1.0, "kinds": [status], "retry_after": 86400}
    server = fake_server(demo_script(faults=faults))
    config, prompts = demo_prompts(tmp_path, server.base_url)
    out = tmp_path / "responses.jsonl"
    t0 = time.monotonic()
    proc = grumem(
        "responses", "--config", str(config), "--prompts", str(prompts), "--out", str(out),
        timeout=60,
    )  # fmt: skip
    seconds = time.monotonic() - t0
    print(f"failed in {seconds:.1f} s")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert seconds < 15
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("grumem responses: error: every request failed: ")
    assert f"1 attempt(s): status {status}: HTTP {status}: " in last
    assert (
        "server asked to retry after 86400 s, more than the 300 s this client waits: "
        "treated as down" in last
    )
    assert not out.exists()
    requests = sum(1 for line in prompts.open() if json.loads(line)["t"] == 1)
    assert server.stats()["requests"] == requests
