"""The LLM client against the fake server over real HTTP: wire bytes, faults, crash, replay, key.

No monkeypatching: the client talks to the fake server (tests/support) in a
subprocess, whose fault schedule is a pure function of (seed, request sha,
attempt), so each test knows what every attempt must have met.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps, sha256_bytes, sha256_text
from grumem.core.recording import stored_body
from grumem.errors import (
    CacheError,
    CorruptEntry,
    GrammarUnsupported,
    GrumemError,
    ReplayMiss,
    RequestError,
    WireMismatch,
)
from grumem.io.jsonl import validate
from grumem.io.tokenizer import cl100k_tokens
from grumem.llm.cache import ResponseCache
from grumem.llm.client import LLMClient, is_answer, retry_after_seconds
from grumem.llm.grammar import GATE_GRAMMAR, fitting_text_chars, grammar_fields
from grumem.llm.local_server import free_port
from grumem.llm.request import build_body, request_sha, sampling_params
from support.draws import fault_for
from support.replies import completion_body
from support.script import load_script

TOKENS = cl100k_tokens()

MODEL = "fake-model"
REPLY = "<think>ok</think>\n<check>no</check>\n<update></update>\n<next>continue</next>"
KEY_ENV = "GRUMEM_TEST_API_KEY"
PARAMS = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "seed": 0}


def body_for(i: int, text: str = "chunk") -> str:
    return build_body(MODEL, [{"role": "user", "content": f"{text} {i}"}], {**PARAMS, "seed": i})


def expected_body(body: str, content: str = REPLY, finish: str = "stop") -> str:
    """What the fake server answers to `body` (no clock, no random id)."""
    sha = request_sha(body)
    prompt_tokens = sum(TOKENS.count(m["content"]) for m in json.loads(body)["messages"])
    return completion_body(
        sha, MODEL, content, prompt_tokens, TOKENS.count(content), finish
    ).decode("utf-8")


def make_client(base_url: str | None, cache_dir: Path, **kw) -> LLMClient:
    opts = dict(
        cache_dir=cache_dir,
        api_key_env=KEY_ENV,
        concurrency=8,
        timeout=5.0,
        retries=3,
        backoff=0.001,
    )
    opts.update(kw)
    return LLMClient(base_url, **opts)


async def run_all(client: LLMClient, bodies: list[str]) -> list:
    async with client:
        return await asyncio.gather(*(client.complete(b, f"b{i}") for i, b in enumerate(bodies)))


# ---------------------------------------------------------------- request, grammar


def test_build_body_order_and_form():
    body = build_body(
        "m",
        [{"role": "user", "content": "é"}],
        {"top_p": 0.5, "temperature": 1e-7, "seed": 3},
        {"grammar": "g"},
    )
    assert (
        body == '{"model":"m","messages":[{"role":"user","content":"é"}],'
        '"top_p":0.5,"temperature":1e-07,"seed":3,"grammar":"g"}'
    )
    assert request_sha(body) == sha256_text(body)
    with pytest.raises(RequestError, match="seed"):
        build_body("m", [{"role": "user", "content": "x"}], {"seed": 1}, {"seed": 2})
    with pytest.raises(RequestError, match="model"):
        build_body("m", [{"role": "user", "content": "x"}], {"model": "other"})
    with pytest.raises(RequestError, match="UTF-8"):
        build_body("m", [{"role": "user", "content": "\ud800"}], {})
    llm = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512}
    assert list(sampling_params(llm, 2)) == ["temperature", "top_p", "max_tokens", "seed"]


def test_grammar_fields_per_server():
    assert grammar_fields("llama.cpp") == {"grammar": GATE_GRAMMAR}
    assert grammar_fields("vllm") == {"structured_outputs": {"grammar": GATE_GRAMMAR}}
    assert "<evidence>" in grammar_fields("llama.cpp", "judge")["grammar"]
    with pytest.raises(GrammarUnsupported, match="llm.grammar"):
        grammar_fields("openai")
    bounded = grammar_fields("llama.cpp", max_text_chars=260)["grammar"]
    assert bounded.endswith("text ::= [^<]{0,260}\n")
    assert bounded.replace("{0,260}", "*") == GATE_GRAMMAR
    assert fitting_text_chars(200) == 210
    with pytest.raises(ValueError, match="max_text_chars"):
        grammar_fields("llama.cpp", max_text_chars=0)


def test_retry_after_and_answer_checks():
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("0") == 0.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert is_answer(200, b'{"choices":[{"message":{"content":"x"}}]}') == (True, None)
    assert is_answer(200, b"<html>")[1].startswith("HTTP 200 but the body is not JSON")
    assert "choices[0].message" in is_answer(200, b'{"choices":[]}')[1]
    assert is_answer(503, b"{}") == (False, None)


# ------------------------------------------------------------------ (a) wire bytes


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


def test_body_not_in_wire_form_is_refused_loudly(module_fake_server, tmp_path):
    server = module_fake_server.use({"model": MODEL, "default": {"content": REPLY}})
    # valid JSON, but not what the SDK writes (spaces): the record would not be the wire
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    with pytest.raises(WireMismatch, match=request_sha(body)):
        asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    assert not list(ResponseCache(tmp_path).shas())
    with pytest.raises(RequestError, match="not JSON"):
        asyncio.run(run_all(make_client(server.base_url, tmp_path), ["{nope"]))


# ---------------------------------------------------------------------- (b) faults

FAULTS = {
    "rate": 0.3,
    "kinds": ["429", "500", "503", "hang", "reset", "truncated", "non_json", "length"],
    "seed": 7,
    "retry_after": 0,
    "hang_s": 2,
}


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


def test_retry_after_is_honoured(module_fake_server, tmp_path):
    script = {
        "model": MODEL,
        "default": {"content": REPLY},
        "faults": {"rate": 1.0, "kinds": ["429"], "only_first": True, "retry_after": 0.6},
    }
    server = module_fake_server.use(script)
    t0 = time.monotonic()
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path, backoff=0.0), [body_for(1)]))
    assert ex.ok and [a["status"] for a in ex.attempts] == [429, 200]
    assert time.monotonic() - t0 >= 0.6


def test_non_retryable_status_ends_at_once(module_fake_server, tmp_path):
    server = module_fake_server.use(
        {"model": MODEL, "replies": [{"match": "^never$", "content": "x"}]}
    )
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body_for(1)]))
    assert not ex.ok and len(ex.attempts) == 1 and ex.response["status"] == 400
    assert "invalid_request_error" in ex.response["body"]
    assert not list(ResponseCache(tmp_path).shas())


# ----------------------------------------------------------------- (c) outage


def test_permanent_outage_fails_after_the_retry_budget(module_fake_server, tmp_path):
    server = module_fake_server.use({"model": MODEL, "default": {"content": REPLY}, "outage": True})
    body = body_for(1)
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path, retries=4), [body]))
    assert not ex.ok
    assert [a["status"] for a in ex.attempts] == [503] * 5
    assert server.stats()["by_sha"] == {request_sha(body): 5}
    message = ex.failure("traj-1/t3")
    assert request_sha(body) in message and "traj-1/t3" in message
    assert "5 attempt(s)" in message and "status 503" in message
    assert not list(ResponseCache(tmp_path).shas())


def test_server_down_is_a_connection_error(tmp_path):
    client = make_client(f"http://127.0.0.1:{free_port()}/v1", tmp_path, retries=1)
    (ex,) = asyncio.run(run_all(client, [body_for(1)]))
    assert not ex.ok and [a["status"] for a in ex.attempts] == [None, None]
    assert ex.response["error"].startswith("connection error")


# ------------------------------------------------------------------ (d) crash

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


def test_corrupt_cache_entry_names_the_file(tmp_path):
    cache = ResponseCache(tmp_path)
    sha = request_sha("x")
    path = cache.path(sha)
    path.parent.mkdir(parents=True)
    path.write_text('{"request_sha256": "', encoding="utf-8")
    with pytest.raises(CacheError, match=str(path)):
        cache.get(sha)
    path.write_text(dumps({"request_sha256": sha, "attempts": [{"attempt": 1}]}), "utf-8")
    with pytest.raises(CacheError, match="attempts.0"):
        cache.get(sha)


def _entry_with_body(path: Path, edit) -> bytes:
    """Rewrite the last attempt's body of the cache entry at `path` with `edit`,
    leaving its recorded sha256 as it was; returns the new bytes of the file."""
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["attempts"][-1]["body"] = edit(entry["attempts"][-1]["body"])
    data = dumps(entry).encode("utf-8")
    path.write_bytes(data)
    return data


def test_a_cached_body_that_differs_from_its_sha_is_never_served(module_fake_server, tmp_path):
    """Replay fails naming the file and the request, and moves nothing; live fails too,
    having set the entry aside, and its rerun sends that one request again."""
    server = module_fake_server.use({"model": MODEL, "default": {"content": REPLY}})
    body = body_for(7)
    sha = request_sha(body)
    [first] = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    path = ResponseCache(tmp_path).path(sha)
    good = path.read_bytes()
    bad = _entry_with_body(path, lambda b: b.replace("<check>no", "<check>yes", 1))

    with pytest.raises(CorruptEntry) as info:
        asyncio.run(run_all(make_client(None, tmp_path, mode="replay"), [body]))
    message = str(info.value)
    assert str(path) in message and f"request {sha} (b0) is corrupt" in message
    assert "attempts.0.sha256" in message and "restore the entry" in message
    assert "\n" not in message and path.read_bytes() == bad  # replay moves nothing

    server.reset()
    with pytest.raises(CorruptEntry, match="Rerun to send this request again") as info:
        asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    aside = path.with_name(path.name + ".corrupt")
    assert info.value.moved_to == aside and str(aside) in str(info.value)
    assert aside.read_bytes() == bad and not path.exists()
    assert sha not in set(ResponseCache(tmp_path).shas())
    assert server.stats()["requests"] == 0  # failing, the job sent nothing

    [again] = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    assert server.stats()["requests"] == 1 and not again.from_cache
    assert again.response["body"] == first.response["body"]
    entry = json.loads(path.read_text(encoding="utf-8"))
    assert entry["attempts"][-1]["body"] == json.loads(good)["attempts"][-1]["body"]
    assert aside.read_bytes() == bad  # kept for a person to look at


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_change_to_a_cached_body_is_found(tmp_path, data):
    """Whatever character of whichever attempt's body changes, the entry is not served."""
    ok = completion_body(request_sha("x"), MODEL, REPLY, 10, 20, "stop")
    failed = b'{"error": {"message": "overloaded"}}'
    attempts = [
        {"attempt": 1, "status": 503, **stored_body(failed), "sha256": sha256_bytes(failed),
         "latency_s": 0.1, "error": "HTTP 503: overloaded"},
        {"attempt": 2, "status": 200, **stored_body(ok), "sha256": sha256_bytes(ok),
         "latency_s": 0.2, "error": None},
    ]  # fmt: skip
    cache = ResponseCache(tmp_path / "c")
    sha = request_sha(f"x{data.draw(st.integers(0, 10**9))}")
    cache.put(sha, attempts)
    assert cache.get(sha) == attempts
    i = data.draw(st.integers(0, 1), label="attempt")
    text = attempts[i]["body"]
    at = data.draw(st.integers(0, len(text) - 1), label="at")
    new = data.draw(st.characters(codec="utf-8").filter(lambda c: c != text[at]), label="new")
    entry = {"request_sha256": sha, "attempts": [dict(a) for a in attempts]}
    entry["attempts"][i]["body"] = text[:at] + new + text[at + 1 :]
    cache.path(sha).write_text(dumps(entry), encoding="utf-8")
    with pytest.raises(CorruptEntry, match=f"attempts.{i}.sha256"):
        cache.get(sha)
    with pytest.raises(CorruptEntry):
        cache.get(sha, set_aside=True)
    assert sha not in cache and cache.path(sha).with_suffix(".json.corrupt").is_file()


# ------------------------------------------------------------------ (e) replay


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


# ------------------------------------------------------------------ (f) secret


def test_api_key_is_in_no_file_and_no_error(module_fake_server, tmp_path, monkeypatch):
    key = "sk-grumem-SECRET-7f3a9c1e5d"
    monkeypatch.setenv(KEY_ENV, key)  # the process environment, not the SDK
    log_path = tmp_path / "debug.log"
    handler = logging.FileHandler(log_path, encoding="utf-8")
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # the SDK's and httpx2's debug logs go to a file too
    try:
        server = module_fake_server.use(
            {
                "model": MODEL,
                "default": {"content": REPLY},
                "faults": {**FAULTS, "kinds": ["429", "reset", "non_json"]},
            }
        )
        cache = tmp_path / "cache"
        good = asyncio.run(
            run_all(
                make_client(server.base_url, cache, retries=6), [body_for(i) for i in range(20)]
            )
        )
        server.use({"model": MODEL, "outage": True})
        bad = asyncio.run(
            run_all(
                make_client(server.base_url, cache, retries=1),
                [body_for(i, "fail") for i in range(3)],
            )
        )
        down = asyncio.run(
            run_all(
                make_client(f"http://127.0.0.1:{free_port()}/v1", cache, retries=0),
                [body_for(1, "down")],
            )
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    assert all(ex.ok for ex in good) and not any(ex.ok for ex in bad + down)
    texts = [ex.failure() for ex in bad + down] + [dumps(ex.attempts) for ex in good + bad + down]
    try:
        asyncio.run(make_client(None, cache, mode="replay").complete(body_for(5, "miss")))
    except ReplayMiss as e:
        texts.append(str(e))
    assert not any(key in t for t in texts)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in written) and log_path.stat().st_size > 0
    for p in written:
        assert key.encode() not in p.read_bytes(), p


# ----------------------------------------------------------- (g) concurrency


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


# ------------------------------------------------- (h) issue 17: secrets, answers, models

SECRET = "sk-grumem-SECRET-4b8e2d6f1a"


def key_forms(key: str) -> list[str]:
    """Every spelling of `key` a leak could take (checked independently of the client's)."""
    from urllib.parse import quote

    raw = key.encode()
    return [key, key.strip(), repr(key)[1:-1], repr(raw)[2:-1], json.dumps(key)[1:-1], quote(key)]


@pytest.mark.parametrize("bad", ["\n", "\r\n", "\t", "\x1b", " ", "\x7f"])
def test_key_with_a_control_character_is_refused_without_showing_it(tmp_path, monkeypatch, bad):
    monkeypatch.setenv(KEY_ENV, SECRET + bad)
    with pytest.raises(GrumemError) as info:
        make_client("http://127.0.0.1:9/v1", tmp_path)
    message = str(info.value)
    assert KEY_ENV in message and "is not shown" in message
    assert "grumem-SECRET" not in message and "sk-" not in message


def test_api_key_env_must_be_a_variable_name_and_is_not_echoed(tmp_path):
    from grumem.config.settings import validate_config

    with pytest.raises(GrumemError) as info:
        make_client("http://127.0.0.1:9/v1", tmp_path, api_key_env=SECRET)
    assert "NAME of an environment variable" in str(info.value)
    assert "grumem-SECRET" not in str(info.value)
    config = {"projects": {"p": {"chunks": "c", "queries": "q"}}, "llm": {"api_key_env": SECRET}}
    with pytest.raises(GrumemError) as info:
        validate_config(config, "my.yaml")
    assert "llm.api_key_env" in str(info.value) and "grumem-SECRET" not in str(info.value)
    ok = {"projects": {"p": {"chunks": "c", "queries": "q"}}, "llm": {"api_key_env": "MY_KEY_2"}}
    assert validate_config(ok)["llm"]["api_key_env"] == "MY_KEY_2"


def test_scrub_removes_every_representation_of_the_key():
    from urllib.parse import quote

    from grumem.llm.client import scrub, secret_forms

    key = SECRET + "\n"
    texts = [
        f"Illegal header value b'Bearer {SECRET}\\n'",  # the h11 error, as a bytes repr
        f"header {key!r}",
        f"json {json.dumps({'k': key})}",
        "url https://h/v1?key=" + quote(key, safe=""),
        f"raw {key} and stripped {SECRET}.",
    ]
    for text in texts:
        out = scrub(text, secret_forms(key))
        assert "[api key]" in out, (text, out)
        assert "SECRET" not in out, (text, out)


def test_a_response_echoing_the_key_is_neither_cached_nor_recorded(
    module_fake_server, tmp_path, monkeypatch
):
    from grumem.errors import KeyInResponse

    monkeypatch.setenv(KEY_ENV, SECRET)
    server = module_fake_server.use(
        {
            "model": MODEL,
            "default": {"content": REPLY},
            "shapes": [{"kind": "echo_authorization", "match": "echo"}],
        }
    )
    cache = tmp_path / "cache"
    ok = asyncio.run(run_all(make_client(server.base_url, cache), [body_for(1)]))
    assert ok[0].ok
    body = body_for(2, "echo")
    with pytest.raises(KeyInResponse) as info:
        asyncio.run(run_all(make_client(server.base_url, cache), [body]))
    message = str(info.value)
    assert request_sha(body) in message and "b2" in message and KEY_ENV in message
    assert not any(form in message for form in key_forms(SECRET))
    assert request_sha(body) not in set(ResponseCache(cache).shas())
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p
    # an entry written before this check (by hand here) is refused on a cache hit too
    sha = request_sha(body)
    echoed = dict(ok[0].attempts[-1], body=ok[0].attempts[-1]["body"] + SECRET)
    echoed["sha256"] = sha256_text(echoed["body"])
    ResponseCache(cache).put(sha, [echoed])
    with pytest.raises(KeyInResponse, match=sha):
        asyncio.run(run_all(make_client(None, cache, mode="replay"), [body]))


@pytest.mark.parametrize("kind", ["null_content", "empty_choices", "sse"])
def test_a_200_that_is_no_answer_is_retried_and_never_cached(module_fake_server, tmp_path, kind):
    server = module_fake_server.use(
        {"model": MODEL, "default": {"content": REPLY}, "shapes": [{"kind": kind}]}
    )
    body = body_for(1)
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path, retries=2), [body]))
    assert not ex.ok and [a["status"] for a in ex.attempts] == [200, 200, 200]
    assert all(a["error"].startswith("HTTP 200 but") for a in ex.attempts)
    assert all(a["body"] for a in ex.attempts)  # what the server sent is recorded
    assert server.stats()["by_sha"] == {request_sha(body): 3}
    assert not list(ResponseCache(tmp_path).shas())
    assert is_answer(200, b'{"choices":[{"message":{"content":""}}]}')[0] is False
    refusal = b'{"choices":[{"message":{"content":null,"refusal":"I cannot"}}]}'
    assert is_answer(200, refusal) == (True, None)


def test_a_404_records_the_body_and_shows_the_servers_error_text(module_fake_server, tmp_path):
    server = module_fake_server.use(
        {"model": MODEL, "default": {"content": REPLY}, "shapes": [{"kind": "not_found"}]}
    )
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body_for(1)]))
    assert not ex.ok and len(ex.attempts) == 1 and ex.response["status"] == 404
    assert "model_not_found" in ex.response["body"]
    expected = f"HTTP 404: The model `{MODEL}` does not exist or you do not have access to it."
    assert ex.response["error"] == expected
    assert expected in ex.failure("t1")


def test_the_answering_model_is_recorded_and_a_mismatch_refused(module_fake_server, tmp_path):
    from grumem.errors import ModelMismatch

    evil = {"model": "gpt-4o-evil-substitute", "default": {"content": REPLY}}
    server = module_fake_server.use(evil)
    body = body_for(1)
    with pytest.raises(ModelMismatch) as info:
        asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    message = str(info.value)
    assert request_sha(body) in message and "'gpt-4o-evil-substitute'" in message
    assert "llm.accept_models" in message
    assert not list(ResponseCache(tmp_path).shas())  # a fixed server gets the request again
    for accept in (["gpt-4o-evil-substitute"], ["gpt-4o-*"], ["*"]):
        client = make_client(server.base_url, tmp_path / str(accept), accept_models=accept)
        (ex,) = asyncio.run(run_all(client, [body]))
        assert ex.ok and ex.response_model == "gpt-4o-evil-substitute"
    # a cached answer is checked as well: accepted before, refused once the rule is gone
    with pytest.raises(ModelMismatch):
        asyncio.run(run_all(make_client(None, tmp_path / "['*']", mode="replay"), [body]))
    server.use({"model": MODEL, "default": {"content": REPLY}})
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path / "same"), [body]))
    assert ex.ok and ex.response_model == MODEL


# ------------------------------------------- a server asking for more than this client takes

DOWN = "server asked to retry after 86400 s, more than the 300 s this client waits: treated as down"


@pytest.mark.parametrize("status", ["429", "503"])
def test_a_retry_after_beyond_the_cap_fails_at_once_naming_it(module_fake_server, tmp_path, status):
    """Retry-After: 86400 (a day): the request neither waits nor tries again there;
    its one attempt's error gives the header's value."""
    server = module_fake_server.use(
        {
            "model": MODEL,
            "default": {"content": REPLY},
            "faults": {"rate": 1.0, "kinds": [status], "retry_after": 86400},
        }
    )
    t0 = time.monotonic()
    exchanges = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body_for(1)]))
    assert time.monotonic() - t0 < 5
    (ex,) = exchanges
    assert not ex.ok and [a["status"] for a in ex.attempts] == [int(status)]
    assert ex.response["error"].startswith(f"HTTP {status}: ")
    assert ex.response["error"].endswith(DOWN)
    assert DOWN in ex.failure("t1")
    assert server.stats()["requests"] == 1
    assert not list(ResponseCache(tmp_path).shas())


def test_a_retry_after_is_read_unclamped_and_a_date_beyond_the_cap_named():
    """The header's seconds as they are (the client compares them with the cap); an
    HTTP date a day ahead is named as the date and its seconds."""
    from email.utils import format_datetime

    from grumem.llm.client import down_for

    assert retry_after_seconds("300") == 300.0
    assert retry_after_seconds("86400") == 86400.0
    when = format_datetime(datetime.now(UTC) + timedelta(days=1), usegmt=True)
    seconds = retry_after_seconds(when)
    assert seconds is not None and 86000 < seconds <= 86400
    text = down_for(when, seconds)
    assert text.startswith(f"server asked to retry at {when} (in 86")
    assert text.endswith(" s), more than the 300 s this client waits: treated as down")


# ------------------------------------------------------------ a body larger than its cap


def huge_body_script(size: int, **shape) -> dict:
    return {
        "model": MODEL,
        "default": {"content": REPLY},
        "shapes": [{"kind": "huge_body", "match": "huge", "bytes": size, **shape}],
    }


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_its_cap_is_a_failed_attempt_retried_and_never_cached(
    module_fake_server, tmp_path, announced
):
    """A 200 of 40 MB (a valid completion if read whole): each attempt fails with the
    cap and what was read in its error, no body recorded; retried, never cached."""
    from grumem.llm.transport import response_cap

    size = 40_000_000
    server = module_fake_server.use(huge_body_script(size, content_length=announced))
    body = body_for(1, "huge")
    cap = response_cap(json.loads(body))
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path, retries=2), [body]))
    assert not ex.ok and [a["status"] for a in ex.attempts] == [200, 200, 200]
    for a in ex.attempts:
        assert (a["body"], a["sha256"]) == (None, None)
        assert a["error"].startswith("HTTP 200: response body too large: ")
        assert f"the {cap}-byte cap for this request" in a["error"]
        if announced:
            assert f"its Content-Length, {size} bytes, is over" in a["error"]
        else:
            read = int(a["error"].split(": ")[2].split(" bytes read")[0])
            assert cap < read <= cap + 65536
    assert "response body too large" in ex.failure()
    assert not list(ResponseCache(tmp_path).shas())
    # the server stopped once the client hung up (what the sockets' buffers took aside)
    assert server.stats()["streamed_bytes"] < 3 * size // 4
    # an ordinary answer of the same server is still taken
    (ok,) = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body_for(2)]))
    assert ok.ok


def test_the_cap_follows_each_requests_max_tokens(module_fake_server, tmp_path):
    """One body of 200 kB: over the cap of a request for 8 tokens, within that of a
    request for 512 (which takes it as its answer); both from one client at once."""
    from grumem.llm.transport import response_cap

    server = module_fake_server.use(huge_body_script(200_000))

    def body(max_tokens: int) -> str:
        return build_body(
            MODEL, [{"role": "user", "content": "huge"}], {**PARAMS, "max_tokens": max_tokens}
        )

    small, large = body(8), body(512)
    assert response_cap(json.loads(small)) < 200_000 < response_cap(json.loads(large))
    exchanges = asyncio.run(
        run_all(make_client(server.base_url, tmp_path, retries=0), [small, large])
    )
    assert [ex.ok for ex in exchanges] == [False, True]
    assert "response body too large" in exchanges[0].response["error"]
    assert len(exchanges[1].response["body"].encode()) == 200_000
