"""The client's transport (the SDK over aiohttp): its pool, and how a lost connection is named.

Real servers on 127.0.0.1: the fake OpenAI server, and a bare TCP server
that drops every connection (what a crashed or restarting server does).
"""

from __future__ import annotations

import asyncio

from grumem.llm.client import LLMClient
from grumem.llm.request import build_body

MODEL = "fake-model"
REPLY = "<think>ok</think>\n<check>no</check>\n<update></update>\n<next>continue</next>"


def body_for(i: int) -> str:
    return build_body(MODEL, [{"role": "user", "content": f"pool {i}"}], {"seed": i})


def test_the_pool_holds_as_many_connections_as_the_concurrency(module_fake_server, tmp_path):
    """150 in flight at once: more than aiohttp's default pool of 100 connections."""
    server = module_fake_server.use(
        {"model": MODEL, "default": {"content": REPLY}, "latency_s": 0.3}
    )
    client = LLMClient(server.base_url, cache_dir=tmp_path, concurrency=150, timeout=20, retries=0)

    async def go() -> list:
        async with client:
            return await asyncio.gather(*(client.complete(body_for(i)) for i in range(300)))

    exchanges = asyncio.run(go())
    assert all(ex.ok for ex in exchanges)
    assert server.stats()["in_flight_max"] == 150
    assert client.counters.in_flight_max == 150


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
                return await client.complete(body_for(1), "dropped")
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
