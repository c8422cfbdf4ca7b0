"""The LLM client against the fake server over real HTTP: wire bytes, faults, crash,
replay, concurrency.

No monkeypatching: the client talks to the fake server (tests/support) in a
subprocess, whose fault schedule is a pure function of (seed, request sha,
attempt), so each test knows what every attempt must have met.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from grumem.core.json_text import dumps, sha256_text
from grumem.errors import (
    GrumemError,
    ReplayMiss,
)
from grumem.io.jsonl import validate
from grumem.llm.cache import ResponseCache
from grumem.llm.client import LLMClient
from grumem.llm.request import build_body, request_sha
from support.draws import fault_for
from support.llm_client import (
    FAULTS,
    MODEL,
    REPLY,
    body_for,
    expected_body,
    make_client,
    run_all,
)
from support.script import load_script


def test_wire_bytes_equal_the_record(module_fake_server, tmp_path):
    server = module_fake_server.use({"model": MODEL, "default": {"content": REPLY}})
    texts = [
        "héllo wörld",
        "日本語のテキスト",
        "emoji 🎉 and \u2028 line sep",
        'quote " \\ \t',
        "nul \x00 byte",
    ]
    bodies = [
        build_body(
            MODEL,
            [{"role": "system", "content": "sys"}, {"role": "user", "content": t}],
            {"temperature": f, "top_p": 0.95, "max_tokens": 7, "seed": i},
        )
        for i, (t, f) in enumerate(zip(texts, [0.1 + 0.2, 1e-7, 2.5e16, 0.0, 1.0], strict=True))
    ]
    exchanges = asyncio.run(run_all(make_client(server.base_url, tmp_path), bodies))
    received = server.stats()["by_sha"]
    for body, ex in zip(bodies, exchanges, strict=True):
        assert ex.ok and not ex.from_cache
        assert ex.request == {"body": body, "sha256": request_sha(body)}
        # the server hashed the bytes it read: they are the recorded body's UTF-8 bytes
        assert received[request_sha(body)] == 1
        assert ex.response["body"] == expected_body(body)
        assert ex.response["sha256"] == sha256_text(ex.response["body"])


def expected_error(fault: str) -> tuple[int | None, str]:
    """(status, error prefix) recorded for an attempt that met `fault`."""
    return {
        "429": (429, "HTTP 429"),
        "500": (500, "HTTP 500"),
        "503": (503, "HTTP 503"),
        "hang": (None, "timeout"),
        "reset": (None, "connection error"),
        "truncated": (200, "HTTP 200 but the body is not JSON"),
        "non_json": (200, "HTTP 200 but the body is not JSON"),
    }[fault]


def test_faults_every_request_answered_and_every_attempt_logged(fake_server, tmp_path):
    script = {"model": MODEL, "default": {"content": REPLY}, "faults": FAULTS}
    server = fake_server(script)
    faults = load_script(script).faults
    bodies = [body_for(i, "fault") for i in range(200)]
    client = make_client(server.base_url, tmp_path, concurrency=16, timeout=1.0, retries=8)
    t0 = time.monotonic()
    exchanges = asyncio.run(run_all(client, bodies))
    elapsed = time.monotonic() - t0
    seen = set()
    for body, ex in zip(bodies, exchanges, strict=True):
        sha = request_sha(body)
        assert ex.ok, ex.failure()
        assert [a["attempt"] for a in ex.attempts] == list(range(1, len(ex.attempts) + 1))
        for a in ex.attempts:
            validate(
                {
                    "kind": "exchange",
                    "trajectory_id": "x",
                    "t": 1,
                    "ask": 0,
                    "chunk_sha": "0" * 64,
                    "memory_before": None,
                    "request": ex.request,
                    "response": a,
                    "attempts": [a],
                },
                "response",
            )
        # attempt n met the fault the server's schedule gave attempt n-1 of this sha
        for a in ex.attempts[:-1]:
            fault = fault_for(faults, sha, a["attempt"] - 1)
            seen.add(fault)
            status, error = expected_error(fault)
            assert (a["status"], a["error"][: len(error)]) == (status, error), (fault, a)
        final = fault_for(faults, sha, len(ex.attempts) - 1)
        assert final in (None, "length")
        if final == "length":
            seen.add(final)
            assert ex.response["body"] == expected_body(body, REPLY[: len(REPLY) // 2], "length")
        else:
            assert ex.response["body"] == expected_body(body)
        assert ex.response["status"] == 200 and ex.response["error"] is None
        cached = ResponseCache(tmp_path).get(sha)
        assert cached == ex.attempts
    assert seen == set(FAULTS["kinds"]), "the run must have met every fault kind"
    stats = server.stats()
    assert stats["requests"] == sum(len(ex.attempts) for ex in exchanges)
    assert client.counters.retries == stats["requests"] - 200
    assert elapsed < 30


CRASH_WORKER = textwrap.dedent("""
    import asyncio, sys
    from grumem.llm.client import LLMClient
    from grumem.llm.request import build_body

    base_url, cache_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    bodies = [build_body("fake-model", [{"role": "user", "content": f"crash {i}"}],
                         {"temperature": 0.7, "seed": i}) for i in range(n)]

    async def main():
        async with LLMClient(base_url, cache_dir=cache_dir, concurrency=8, timeout=10,
                             retries=2, backoff=0.01) as client:
            await asyncio.gather(*(client.complete(b) for b in bodies))

    asyncio.run(main())
""")


def crash_bodies(n: int) -> list[str]:
    return [
        build_body(
            MODEL, [{"role": "user", "content": f"crash {i}"}], {"temperature": 0.7, "seed": i}
        )
        for i in range(n)
    ]


def test_crash_rerun_sends_only_unanswered(fake_server, tmp_path):
    server = fake_server({"model": MODEL, "default": {"content": REPLY}, "latency_s": 0.05})
    cache = ResponseCache(tmp_path / "cache")
    cmd = [sys.executable, "-c", CRASH_WORKER, server.base_url, str(cache.root), "200"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while sum(1 for _ in cache.shas()) < 60 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = set(cache.shas())
    assert 60 <= len(before) < 200, "the kill must land mid-way"
    for sha in before:  # every entry parses: no partial one
        assert cache.get(sha) is not None
    server.reset()
    # the rerun: the same bodies, the same cache, a fresh client
    rerun = make_client(server.base_url, cache.root, concurrency=8)
    exchanges = asyncio.run(run_all(rerun, crash_bodies(200)))
    assert all(ex.ok for ex in exchanges)
    all_shas = {request_sha(b) for b in crash_bodies(200)}
    received = server.stats()["by_sha"]
    assert not before & set(received), "an answered request was sent again"
    assert set(received) == all_shas - before
    counters = rerun.counters
    assert (counters.cache_hits, counters.answered) == (len(before), 200 - len(before))
    assert set(cache.shas()) == all_shas
    for sha in all_shas:
        assert cache.get(sha)[-1]["status"] == 200
    # the only files besides entries are temporary ones of the killed writer
    stray = [p for p in cache.root.rglob("*") if p.is_file() and p.stem not in all_shas]
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in stray)


def test_replay_reproduces_every_response_byte_for_byte(fake_server, tmp_path):
    script = {
        "model": MODEL,
        "default": {"content": REPLY},
        "faults": {**FAULTS, "kinds": ["500", "non_json", "length"]},
    }
    server = fake_server(script)
    bodies = [body_for(i, "replay ünïcode") for i in range(40)]
    live = asyncio.run(run_all(make_client(server.base_url, tmp_path, retries=6), bodies))
    server.stop()
    replay = asyncio.run(run_all(make_client(None, tmp_path, mode="replay"), bodies))
    for a, b in zip(live, replay, strict=True):
        assert a.ok and b.ok and b.from_cache and not a.from_cache
        assert dumps(b.attempts) == dumps(a.attempts)
        assert b.response["body"].encode("utf-8") == a.response["body"].encode("utf-8")
        assert b.request == a.request
    missing = body_for(999, "never sent")
    with pytest.raises(ReplayMiss, match=request_sha(missing)) as info:
        asyncio.run(make_client(None, tmp_path, mode="replay").complete(missing, "p/q/s/0 t=4"))
    assert "p/q/s/0 t=4" in str(info.value) and isinstance(info.value, GrumemError)


def test_in_flight_never_exceeds_the_limit(module_fake_server, tmp_path):
    server = module_fake_server.use(
        {"model": MODEL, "default": {"content": REPLY}, "latency_s": 0.05}
    )
    client = make_client(server.base_url, tmp_path, concurrency=4)
    exchanges = asyncio.run(run_all(client, [body_for(i) for i in range(40)]))
    assert all(ex.ok for ex in exchanges)
    assert server.stats()["in_flight_max"] == 4
    c = client.counters.snapshot()
    assert c["in_flight_max"] == 4 and c["in_flight"] == 0
    assert (c["requests"], c["sent"], c["answered"], c["cache_hits"]) == (40, 40, 40, 0)
    again = make_client(server.base_url, tmp_path, concurrency=4)
    asyncio.run(run_all(again, [body_for(i) for i in range(40)]))
    assert again.counters.cache_hits == 40 and again.counters.sent == 0


def test_config_and_mode_errors(tmp_path):
    with pytest.raises(GrumemError, match="mode"):
        LLMClient("http://127.0.0.1:1/v1", cache_dir=tmp_path, mode="record-only")
    with pytest.raises(GrumemError, match="base_url"):
        LLMClient(None, cache_dir=tmp_path, mode="live")
    llm = {
        "cache_dir": str(tmp_path),
        "mode": "replay",
        "api_key_env": "X",
        "concurrency": 2,
        "timeout": 3,
        "retries": 1,
        "backoff": 0.1,
        "base_url": None,
    }
    client = LLMClient.from_config(llm)
    assert (client.mode, client.concurrency, client.retries) == ("replay", 2, 1)
