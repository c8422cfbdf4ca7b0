"""Several LLM endpoints through the real `snakemake` and `grumem` commands:
two fake servers, one killed with SIGKILL mid-run; every turn is answered and the
corpus is byte for byte the one a single server gives."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from support.workflow import (
    PINNED_DEMO_CORPUS,
    REPO,
    corpus_digests,
    env,
    fake_demo_script,
    files_under,
    read_lines,
    snakemake,
    write_config,
)

LOG = "results/demo/log.jsonl"
CORPUS = ("trajectories.jsonl", "turns.parquet")


def answers_by_endpoint(work: Path) -> Counter:
    """Which endpoint gave each recorded answer (the last attempt of every ask)."""
    return Counter(
        r["response"]["endpoint"]
        for f in files_under(work / "results/demo/responses")
        for r in read_lines(f)
        if r["kind"] == "exchange"
    )


def lost_attempts(work: Path, url: str) -> list[dict]:
    return [
        a
        for f in files_under(work / "results/demo/responses")
        for r in read_lines(f)
        if r["kind"] == "exchange"
        for a in r["attempts"]
        if a["endpoint"] == url and a["status"] is None
    ]


def test_two_servers_one_killed_mid_run_give_the_one_server_corpus(tmp_path, fake_server) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for work in (one, two):
        work.mkdir()
    alone = fake_server(fake_demo_script())
    write_config(one, alone.base_url)
    snakemake(one, "all")

    doomed = fake_server(fake_demo_script(latency_s=0.1))
    other = fake_server(fake_demo_script(latency_s=0.1))
    listed = [{"url": doomed.base_url, "concurrency": 4}, other.base_url]
    write_config(two, listed, llm={"retries": 2, "backoff": 0.05})
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    cmd += ["-d", str(two), "--cores", "2", "all"]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while doomed.stats()["answered"] < 10:
        assert time.monotonic() < deadline and proc.poll() is None, "run ended before the kill"
        time.sleep(0.02)
    before = {"doomed": doomed.stats()["answered"], "other": other.stats()["answered"]}
    doomed.kill()  # SIGKILL, requests in flight
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out.decode(errors="replace")[-3000:]

    log = read_lines(two / LOG)
    assert len(log) == 72 and all(line["status"] == "ok" for line in log)
    answered = answers_by_endpoint(two)
    assert sum(answered.values()) == 72
    assert before["doomed"] <= answered[doomed.base_url] < 72
    assert answered[other.base_url] == other.stats()["answered"] > before["other"]
    # the kill was met: connection errors recorded at the killed endpoint, which was
    # taken out (each responses job after the kill finds it dead again)
    assert lost_attempts(two, doomed.base_url)
    job_logs = "".join(p.read_text() for p in files_under(two / "logs/responses/demo"))
    assert f"llm: endpoint {doomed.base_url} taken out" in job_logs
    print(f"answers: before the kill {before}, in the end {dict(answered)}")

    for name in CORPUS:
        a = (one / "results/demo/corpus" / name).read_bytes()
        assert (two / "results/demo/corpus" / name).read_bytes() == a, name
    assert corpus_digests(two) == corpus_digests(one) == PINNED_DEMO_CORPUS
