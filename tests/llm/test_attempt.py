"""One HTTP attempt (grumem.llm.attempt): a server that is not there, or drops the
connection, is a recorded connection error; a body over its cap a failed attempt, retried,
never cached, the cap following each request's max_tokens. Real servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from grumem.llm.cache import ResponseCache
from grumem.llm.client import LLMClient
from grumem.llm.local_server import free_port
from grumem.llm.request import build_body
from support.llm_client import (
    MODEL,
    PARAMS,
    REPLY,
    body_for,
    make_client,
    run_all,
)


def test_server_down_is_a_connection_error(tmp_path):
    client = make_client(f"http://127.0.0.1:{free_port()}/v1", tmp_path, retries=1)
    (ex,) = asyncio.run(run_all(client, [body_for(1)]))
    assert not ex.ok and [a["status"] for a in ex.attempts] == [None, None]
    assert ex.response["error"].startswith("connection error")


def bare_body(i: int) -> str:
    return build_body(MODEL, [{"role": "user", "content": f"pool {i}"}], {"seed": i})


def test_a_connection_dropped_before_the_answer_is_a_connection_error(tmp_path):
    """aiohttp's ServerDisconnectedError reaches the SDK as a ConnectTimeout; the
    record says what it was, and every attempt is recorded."""
    connections = 0

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.readuntil(b"\r\n\r\n")  # the request's head, then hang up
        writer.close()

    async def go():
        tcp = await asyncio.start_server(drop, "127.0.0.1", 0)
        port = tcp.sockets[0].getsockname()[1]
        try:
            async with LLMClient(
                f"http://127.0.0.1:{port}/v1",
                cache_dir=tmp_path,
                timeout=5,
                retries=2,
                backoff=0.001,
            ) as client:
                return await client.complete(bare_body(1), "dropped")
        finally:
            tcp.close()
            await tcp.wait_closed()

    ex = asyncio.run(go())
    assert not ex.ok
    assert [a["status"] for a in ex.attempts] == [None, None, None]
    for a in ex.attempts:
        assert a["error"].startswith("connection error: ServerDisconnectedError"), a["error"]
    assert connections == 3
    assert "3 attempt(s)" in ex.failure() and "connection error" in ex.failure()


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
