"""Several LLM endpoints: the least busy first, each under its own cap, a
dead one taken out and its requests answered by the others, the endpoint recorded
per attempt but no part of the cache key.

The dispatch itself (grumem.llm.endpoints.EndpointPool) is tested on its own, in an
event loop; everything else through the client against fake servers on 127.0.0.1
(tests/support), over real HTTP, one of them killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.errors import EndpointError, RecordError
from grumem.io.jsonl import validate
from grumem.llm.cache import ResponseCache
from grumem.llm.client import LLMClient
from grumem.llm.endpoints import Endpoint, EndpointPool, endpoints, total_concurrency
from grumem.llm.local_server import free_port
from grumem.llm.request import build_body, request_sha

MODEL = "fake-model"
REPLY = "<think>ok</think>\n<check>no</check>\n<update></update>\n<next>continue</next>"


def body_for(i: int, text: str = "replica") -> str:
    return build_body(MODEL, [{"role": "user", "content": f"{text} {i}"}], {"seed": i})


def script(**extra) -> dict:
    return {"model": MODEL, "default": {"content": REPLY}, **extra}


def make_client(base_url, cache_dir: Path, **kw) -> LLMClient:
    opts = dict(cache_dir=cache_dir, api_key_env="GRUMEM_TEST_KEY", retries=2, backoff=0.001)
    return LLMClient(base_url, **{"timeout": 5.0, **opts, **kw})


async def complete_all(client: LLMClient, bodies: list[str]) -> list:
    return await asyncio.gather(*(client.complete(b, f"b{i}") for i, b in enumerate(bodies)))


def run_all(client: LLMClient, *batches: list[str]) -> list[list]:
    """Each batch after the one before, with one client (its endpoints' state kept)."""

    async def go() -> list[list]:
        async with client:
            return [await complete_all(client, batch) for batch in batches]

    return asyncio.run(go())


def refused_url() -> str:
    """An endpoint on 127.0.0.1 where nothing listens: every connection is refused."""
    return f"http://127.0.0.1:{free_port()}/v1"


def endpoints_of(exchange) -> list[str]:
    return [a["endpoint"] for a in exchange.attempts]


# --------------------------------------------------------------- the pool on its own


def test_pool_picks_the_least_in_flight_then_list_order_within_caps():
    async def go() -> None:
        pool = EndpointPool([Endpoint("a", 2), Endpoint("b", 2), Endpoint("c", 1)])
        assert pool.total == 5
        got = [await pool.acquire() for _ in range(5)]
        assert got == [0, 1, 2, 0, 1]  # ties go to the first listed
        waiting = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0)
        assert not waiting.done()  # every endpoint at its cap
        pool.release(2)
        assert await waiting == 2
        assert pool.in_flight == [2, 2, 1] and pool.in_flight_max == [2, 2, 1]

    asyncio.run(go())


def test_pool_total_cap_and_retries_bound_to_their_endpoint():
    async def go() -> None:
        pool = EndpointPool([Endpoint("a", 4), Endpoint("b", 4)], total=3)
        assert [await pool.acquire() for _ in range(3)] == [0, 1, 0]
        new = asyncio.ensure_future(pool.acquire())
        retry = asyncio.ensure_future(pool.acquire(1))  # a retry keeps to endpoint b
        await asyncio.sleep(0)
        assert not new.done() and not retry.done()  # the total is reached
        pool.release(0)
        # retries are served first, at their own endpoint, though `a` has the free slot
        assert await retry == 1
        assert not new.done()
        pool.release(1)
        assert await new == 0  # a: 1 in flight, b: 1, list order

    asyncio.run(go())


def test_pool_takes_an_endpoint_out_but_never_the_last():
    async def go() -> None:
        pool = EndpointPool([Endpoint("a", 1), Endpoint("b", 1)])
        assert await pool.acquire() == 0
        retry = asyncio.ensure_future(pool.acquire(0))  # waits: `a` is at its cap
        await asyncio.sleep(0)
        assert pool.take_out(0) is True
        assert await retry is None  # it goes elsewhere
        assert await pool.acquire(0) is None
        assert await pool.acquire() == 1  # only `b` is live
        pool.release(0)  # the request in flight at `a` still ends
        assert pool.take_out(1) is False and pool.live == [False, True]  # the last stays
        assert pool.take_out(0) is True  # already out: b is there

    asyncio.run(go())


def test_endpoints_from_the_setting():
    assert endpoints(None, 8) == []
    assert endpoints("http://a/v1", 8) == [Endpoint("http://a/v1", 8)]
    listed = ["http://a/v1", {"url": "http://b/v1", "concurrency": 3}, {"url": "http://c/v1"}]
    assert endpoints(listed, 8) == [
        Endpoint("http://a/v1", 8),
        Endpoint("http://b/v1", 3),
        Endpoint("http://c/v1", 8),
    ]
    assert total_concurrency({"base_url": listed, "concurrency": 8}) == 19
    assert total_concurrency({"base_url": "http://a/v1", "concurrency": 8}) == 8
    assert total_concurrency({"base_url": None, "concurrency": 8}) == 8
    with pytest.raises(EndpointError, match=r"llm.base_url\[2\]: http://a/v1/ is listed twice"):
        endpoints(["http://a/v1", "http://b/v1", {"url": "http://a/v1/"}], 8)


# ------------------------------------------------------- least in flight, per-endpoint caps


def test_the_fast_endpoint_gets_more_requests(fake_server, tmp_path):
    slow = fake_server(script(latency_s=0.4))
    fast = fake_server(script(latency_s=0.02))
    # the slow one first: list order alone would favour it
    urls = [slow.base_url, fast.base_url]
    client = make_client(urls, tmp_path, concurrency=4)
    [exchanges] = run_all(client, [body_for(i) for i in range(80)])
    assert all(ex.ok for ex in exchanges)
    n_slow, n_fast = slow.stats()["answered"], fast.stats()["answered"]
    assert n_slow + n_fast == 80
    assert n_fast > 4 * n_slow, (n_slow, n_fast)
    # each attempt names the server that really got it
    by_slow = set(slow.stats()["by_sha"])
    for ex in exchanges:
        want = slow.base_url if ex.request["sha256"] in by_slow else fast.base_url
        assert endpoints_of(ex) == [want]


def test_each_endpoint_keeps_to_its_own_cap(fake_server, tmp_path):
    a = fake_server(script(latency_s=0.1))
    b = fake_server(script(latency_s=0.1))
    listed = [{"url": a.base_url, "concurrency": 2}, {"url": b.base_url, "concurrency": 5}]
    client = make_client(listed, tmp_path / "one", concurrency=64)
    assert client.concurrency == 7  # the sum of the caps
    [exchanges] = run_all(client, [body_for(i) for i in range(60)])
    assert all(ex.ok for ex in exchanges)
    assert (a.stats()["in_flight_max"], b.stats()["in_flight_max"]) == (2, 5)
    assert client.counters.in_flight_max == 7
    # the job's llm_slots cap the total below the sum of the caps
    a.reset(), b.reset()
    client = make_client(listed, tmp_path / "two", concurrency=64, max_in_flight=3)
    [exchanges] = run_all(client, [body_for(i) for i in range(30)])
    assert all(ex.ok for ex in exchanges)
    assert client.counters.in_flight_max == 3
    assert a.stats()["in_flight_max"] + b.stats()["in_flight_max"] <= 3
    assert a.stats()["in_flight_max"] == 2  # least in flight: b gets no more than a


# ------------------------------------------------------------- a dead endpoint taken out


def test_a_refused_endpoint_is_taken_out_and_its_requests_answered_elsewhere(
    fake_server, tmp_path, capsys
):
    server = fake_server(script(latency_s=0.02))
    dead = refused_url()
    client = make_client([dead, server.base_url], tmp_path, concurrency=4, retries=2)
    first, later = run_all(
        client, [body_for(i) for i in range(40)], [body_for(i, "later") for i in range(20)]
    )
    assert all(ex.ok for ex in first + later)
    moved = [ex for ex in first if dead in endpoints_of(ex)]
    assert moved, "no request went to the dead endpoint first"
    for ex in moved:
        at_dead = [a for a in ex.attempts if a["endpoint"] == dead]
        # every attempt is recorded; attempts count from 1 again at the next endpoint
        assert [a["attempt"] for a in at_dead] == list(range(1, len(at_dead) + 1))
        assert len(at_dead) <= 3  # retries: 2
        assert all(a["status"] is None for a in at_dead)
        assert all(a["error"].startswith("connection error") for a in at_dead)
        assert ex.attempts[len(at_dead) :] == [ex.response]
        assert (ex.response["endpoint"], ex.response["attempt"]) == (server.base_url, 1)
    # taken out for the rest of the job: later requests never go there
    assert all(endpoints_of(ex) == [server.base_url] for ex in later)
    assert server.stats()["answered"] == 60
    err = capsys.readouterr().err
    assert err.count(f"llm: endpoint {dead} taken out") == 1, err
    assert "requests go to the 1 other live endpoint(s)" in err


@pytest.mark.parametrize(
    "trouble,error",
    [({"outage": True}, "HTTP 503"), ({"latency_s": 3}, "timeout")],
    ids=["http-503", "timeout"],
)
def test_an_http_error_or_a_timeout_takes_no_endpoint_out(
    fake_server, tmp_path, capsys, trouble, error
):
    """A server that answers (any status) or is slow is there: its requests fail as
    with one endpoint, and it keeps getting requests."""
    troubled = fake_server(script(**trouble))
    good = fake_server(script())
    urls = [troubled.base_url, good.base_url]
    client = make_client(urls, tmp_path, concurrency=2, retries=1, timeout=0.5)
    first, later = run_all(client, [body_for(i) for i in range(8)], [body_for(9, "later")])
    failed = [ex for ex in first if not ex.ok]
    assert failed and all(endpoints_of(ex) == [troubled.base_url] * 2 for ex in failed)
    assert all(ex.response["error"].startswith(error) for ex in failed)
    assert all(endpoints_of(ex) == [good.base_url] for ex in first if ex.ok)
    # still live: the next request goes to it (both idle, list order)
    assert endpoints_of(later[0])[0] == troubled.base_url
    assert "taken out" not in capsys.readouterr().err


def test_an_endpoint_asking_for_a_day_is_taken_out_at_once(fake_server, tmp_path, capsys):
    """429 with Retry-After: 86400 from one of two: that endpoint is down for this run.
    The request goes on at the other at once, with no retry nor wait there, and so
    does every later request; the last live endpoint is never taken out."""
    down = fake_server(
        script(faults={"rate": 1.0, "kinds": ["429"], "retry_after": 86400}, latency_s=0.02)
    )
    good = fake_server(script(latency_s=0.02))
    client = make_client([down.base_url, good.base_url], tmp_path, concurrency=2, retries=3)
    t0 = time.monotonic()
    first, later = run_all(
        client, [body_for(i, "day") for i in range(10)], [body_for(i, "after") for i in range(6)]
    )
    assert time.monotonic() - t0 < 10
    assert all(ex.ok for ex in first + later)
    moved = [ex for ex in first if endpoints_of(ex)[0] == down.base_url]
    assert moved, "no request went to the endpoint that is down first"
    for ex in moved:
        assert endpoints_of(ex) == [down.base_url, good.base_url]
        assert ex.attempts[0]["status"] == 429 and ex.attempts[0]["attempt"] == 1
        assert ex.attempts[0]["error"].endswith(
            "server asked to retry after 86400 s, more than the 300 s this client waits: "
            "treated as down"
        )
    assert all(endpoints_of(ex) == [good.base_url] for ex in later)
    assert down.stats()["requests"] == len(moved)
    err = capsys.readouterr().err
    assert err.count(f"llm: endpoint {down.base_url} taken out") == 1, err
    assert "server asked to retry after 86400 s" in err
    # alone, the same endpoint fails each request at its first attempt, and stays
    down.reset()
    alone = make_client(down.base_url, tmp_path / "alone", retries=3)
    [failed] = run_all(alone, [body_for(i, "alone") for i in range(3)])
    assert [len(ex.attempts) for ex in failed] == [1, 1, 1] and not any(ex.ok for ex in failed)
    assert down.stats()["requests"] == 3 and "taken out" not in capsys.readouterr().err


def test_every_endpoint_down_fails_every_request_as_with_one(tmp_path, capsys):
    urls = [refused_url(), refused_url()]
    client = make_client(urls, tmp_path, concurrency=2, retries=1)
    [exchanges] = run_all(client, [body_for(i) for i in range(6)])
    assert not any(ex.ok for ex in exchanges)
    # whichever fails a request first is taken out; the last live one never is
    err = capsys.readouterr().err
    assert err.count("taken out") == 1
    [out] = [u for u in urls if f"endpoint {u} taken out" in err]
    [left] = [u for u in urls if u != out]
    for ex in exchanges:
        # every request ends at the one left, its retries spent there, as with one endpoint
        assert ex.attempts[-2:] == [
            {**a, "endpoint": left, "attempt": n} for n, a in enumerate(ex.attempts[-2:], 1)
        ]
        assert "connection error" in ex.failure()


def test_a_server_killed_mid_run_every_request_answered_the_same(fake_server, tmp_path):
    """kill -9 of one of two servers while requests are in flight there: those fail
    with a connection error, are retried, then answered by the other; every answer
    is the one a single server gives."""
    bodies = [body_for(i, "kill") for i in range(120)]
    alone = fake_server(script(latency_s=0.05))
    [reference] = run_all(make_client(alone.base_url, tmp_path / "alone", concurrency=8), bodies)
    doomed = fake_server(script(latency_s=0.05))
    other = fake_server(script(latency_s=0.05))
    client = make_client([doomed.base_url, other.base_url], tmp_path / "two", concurrency=4)
    figures = {}

    async def kill_when_busy() -> None:
        while (await asyncio.to_thread(doomed.stats))["answered"] < 20:
            await asyncio.sleep(0.01)
        doomed.kill()  # SIGKILL
        figures["other before"] = (await asyncio.to_thread(other.stats))["answered"]

    async def go() -> list:
        async with client:
            killer = asyncio.create_task(kill_when_busy())
            result = await complete_all(client, bodies)
            await killer
            return result

    exchanges = asyncio.run(go())
    assert [ex.ok for ex in exchanges] == [True] * 120
    assert [ex.response["body"] for ex in exchanges] == [ex.response["body"] for ex in reference]
    by_endpoint = {
        url: sum(ex.response["endpoint"] == url for ex in exchanges)
        for url in (doomed.base_url, other.base_url)
    }
    lost = [ex for ex in exchanges if any(a["status"] is None for a in ex.attempts)]
    assert lost, "no request was in flight at the killed server"
    assert all(ex.response["endpoint"] == other.base_url for ex in lost)
    assert 20 <= by_endpoint[doomed.base_url] < 120 - figures["other before"]
    assert by_endpoint[other.base_url] == other.stats()["answered"]
    print(f"answered before/after the kill: {by_endpoint}, {figures}, moved {len(lost)}")


# ------------------------------------------------- the record, the cache key, the schema


def test_the_endpoint_is_recorded_but_no_part_of_the_cache_key(fake_server, tmp_path):
    a, b = fake_server(script()), fake_server(script())
    bodies = [body_for(i) for i in range(6)]
    [live] = run_all(make_client([a.base_url], tmp_path), bodies)
    # another endpoint, the same requests: all from the cache, nothing sent
    again = make_client([b.base_url, a.base_url], tmp_path)
    [cached] = run_all(again, bodies)
    assert again.counters.cache_hits == 6 and b.stats()["requests"] == 0
    assert [ex.attempts for ex in cached] == [ex.attempts for ex in live]
    assert {ex.response["endpoint"] for ex in cached} == {a.base_url}
    [replayed] = run_all(make_client(None, tmp_path, mode="replay"), bodies)
    assert [ex.attempts for ex in replayed] == [ex.attempts for ex in live]
    for ex, body in zip(live, bodies, strict=True):
        assert ex.request == {"body": body, "sha256": request_sha(body)}
        entry = json.loads(ResponseCache(tmp_path).path(request_sha(body)).read_text())
        assert entry["attempts"][0]["endpoint"] == a.base_url


def exchange_record(attempt: dict) -> dict:
    return {
        "kind": "exchange",
        "trajectory_id": "x",
        "t": 1,
        "ask": 0,
        "chunk_sha": "0" * 64,
        "memory_before": None,
        "request": {"body": "{}", "sha256": "0" * 64},
        "response": attempt,
        "attempts": [attempt],
    }


def test_the_response_schema_takes_the_endpoint_per_attempt(tmp_path):
    attempt = {
        "attempt": 1,
        "status": 200,
        "body": "{}",
        "sha256": "0" * 64,
        "latency_s": 0.1,
        "error": None,
    }
    validate(exchange_record(attempt), "response")  # written before the field existed
    validate(exchange_record({**attempt, "endpoint": "http://gpu01:8000/v1"}), "response")
    with pytest.raises(RecordError, match="endpoint"):
        validate(exchange_record({**attempt, "endpoint": 1}), "response")
    with pytest.raises(RecordError, match="endpoints"):
        validate(exchange_record({**attempt, "endpoints": "x"}), "response")


def test_the_client_takes_the_llm_section_with_a_list(tmp_path):
    llm = {
        "cache_dir": str(tmp_path),
        "mode": "live",
        "api_key_env": "X",
        "concurrency": 3,
        "timeout": 3,
        "retries": 1,
        "backoff": 0.1,
        "base_url": ["http://127.0.0.1:1/v1", {"url": "http://127.0.0.1:2/v1", "concurrency": 5}],
    }
    assert LLMClient.from_config(llm).concurrency == 8
    assert LLMClient.from_config(llm, max_in_flight=4).concurrency == 4
    # one URL: the job's slots are its cap, as --concurrency overrode llm.concurrency
    one = {**llm, "base_url": "http://127.0.0.1:1/v1"}
    assert LLMClient.from_config(one, max_in_flight=16).concurrency == 16
    with pytest.raises(EndpointError, match="listed twice"):
        LLMClient.from_config({**llm, "base_url": ["http://x/v1", "http://x/v1"]})


def test_no_request_waits_forever_when_an_endpoint_dies_under_load(tmp_path, fake_server):
    """Requests queued for a slot at a dead endpoint move on at once (no hang)."""
    server = fake_server(script(latency_s=0.05))
    listed = [{"url": refused_url(), "concurrency": 1}, {"url": server.base_url, "concurrency": 1}]
    client = make_client(listed, tmp_path, retries=3, backoff=0.05)
    t0 = time.monotonic()
    [exchanges] = run_all(client, [body_for(i) for i in range(10)])
    assert all(ex.ok for ex in exchanges)
    assert time.monotonic() - t0 < 10


# --------------------------------------------------------- the pool's invariants, at random

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), st.one_of(st.none(), st.integers(0, 3))),
        st.tuples(st.just("release"), st.integers(0, 50)),
        st.tuples(st.just("take_out"), st.integers(0, 3)),
    ),
    max_size=60,
)


@given(caps=st.lists(st.integers(1, 3), min_size=1, max_size=4), total=st.integers(1, 8), ops=OPS)
@settings(max_examples=200, deadline=None)
def test_pool_invariants_under_any_sequence(caps: list[int], total: int, ops: list) -> None:
    """Whatever the order of acquires, releases and take-outs: no endpoint over its
    cap, the total never over its cap, a new request always at a least busy live
    endpoint, and nobody left waiting while a slot it may take is free."""

    async def go() -> None:
        pool = EndpointPool([Endpoint(f"e{i}", c) for i, c in enumerate(caps)], total)
        held: list[int] = []
        waiting: list[asyncio.Task] = []

        async def settle() -> None:
            for _ in range(3):
                await asyncio.sleep(0)
            for task in [t for t in waiting if t.done()]:
                waiting.remove(task)
                if task.result() is not None:
                    held.append(task.result())

        for op, arg in ops:
            if op == "acquire":
                bound = None if arg is None or arg >= len(caps) else arg
                before = list(pool.in_flight)
                free = [i for i in range(len(caps)) if pool.live[i] and before[i] < caps[i]]
                fast = not pool._any and sum(before) < total and bool(free)
                task = asyncio.ensure_future(pool.acquire(bound))
                waiting.append(task)
                await settle()
                if bound is None and fast:
                    assert task.done()
                    assert before[task.result()] == min(before[i] for i in free)
            elif op == "release" and held:
                pool.release(held.pop(arg % len(held)))
            elif op == "take_out" and arg < len(caps):
                pool.take_out(arg)
            await settle()
            assert sorted(held) == sorted(i for i, n in enumerate(pool.in_flight) for _ in range(n))
            assert all(n <= c for n, c in zip(pool.in_flight, caps, strict=True))
            assert pool.busy == len(held) <= total and any(pool.live)
            if pool._any:  # a waiting new request: no live endpoint has a slot for it
                assert pool._pick() is None
            for i, queue in enumerate(pool._bound):
                assert not [f for f in queue if not f.done()] or (
                    pool.live[i] and not pool._free(i)
                )
        for task in waiting:
            task.cancel()

    asyncio.run(go())
