"""How the client reaches a server (grumem.llm.transport): the SDK's public `post` over
a transport of our own, which sends what the SDK's own aiohttp client sends, answers
as it does, reads a response body no further than its cap, and holds as many
connections as the client has requests in flight.

Real HTTP servers on 127.0.0.1: the fake OpenAI server, and bare TCP servers that
write canned responses byte for byte (a gzip body, a connection cut mid-body, a
body larger than any answer) and keep what they were sent.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib

import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.llm.client import LLMClient
from grumem.llm.request import build_body
from grumem.llm.transport import (
    ENVELOPE,
    PIECE,
    RESPONSE_CAP,
    AiohttpTransport,
    ResponseTooLarge,
    response_cap,
    sdk_client,
)

PATH = "/chat/completions"
ANSWER = b'{"choices":[{"message":{"content":"ok"}}]}'


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head, body) of one HTTP/1.1 request with a Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(v)
            for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
            if k.lower() == b"content-length"
        ),
        0,
    )
    return head, await reader.readexactly(length)


# --------------------------------------------------- what goes on the wire


def test_each_request_is_the_one_the_sdks_own_client_sends() -> None:
    """Header for header and byte for byte, the request line, headers and body our
    SDK client puts on the wire are those of AsyncOpenAI over the SDK's own aiohttp
    client (openai.DefaultAioHttpClient), for every body; the body is the record."""
    seen: list[tuple[bytes, bytes]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                seen.append(await read_request(reader))
            except asyncio.IncompleteReadError:
                break
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
            )
            await writer.drain()
        writer.close()

    bodies = [
        build_body("m", [{"role": "user", "content": text}], {"seed": i}).encode("utf-8")
        for i, text in enumerate(["a", "été " * 300, "", "x" * 10_000, "日本 🎉 \u2028"])
    ]

    async def go() -> tuple[list, list]:
        tcp = await asyncio.start_server(serve, "127.0.0.1", 0)
        base_url = f"http://127.0.0.1:{tcp.sockets[0].getsockname()[1]}/v1"
        ours = sdk_client(base_url, "sk-test", 30.0, 4)
        sdks = openai.AsyncOpenAI(
            base_url=base_url,
            api_key="sk-test",
            max_retries=0,
            timeout=30.0,
            http_client=openai.DefaultAioHttpClient(),
        )
        try:
            heads = []
            for client in (ours, sdks):
                seen.clear()
                for wire in bodies:
                    r = await client.post(PATH, cast_to=httpx2.Response, content=wire)
                    assert r.status_code == 200 and r.request.content == wire
                heads.append(list(seen))
            return heads[0], heads[1]
        finally:
            await ours.close()
            await sdks.close()
            tcp.close()
            await tcp.wait_closed()

    ours, sdks = asyncio.run(go())
    assert len(ours) == len(bodies)
    assert ours == sdks
    assert [body for _, body in ours] == bodies
    assert all(head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") for head, _ in ours)
    assert all(b"\r\nauthorization: Bearer sk-test\r\n" in head for head, _ in ours)


def test_post_sends_the_bytes_and_returns_the_raw_response(module_fake_server) -> None:
    server = module_fake_server.use({"model": "m", "default": {"content": "hi"}})

    async def go() -> list[httpx2.Response]:
        sdk = sdk_client(server.base_url, "sk-test", 30.0, 2)
        async with sdk:
            return [
                await sdk.post(
                    PATH,
                    cast_to=httpx2.Response,
                    content=build_body("m", [{"role": "user", "content": c}], {}).encode(),
                )
                for c in ("one", "two")
            ]

    first, second = asyncio.run(go())
    for r, content in ((first, "one"), (second, "two")):
        assert r.status_code == 200
        assert json.loads(r.request.content)["messages"][0]["content"] == content
        assert json.loads(r.content)["choices"][0]["message"]["content"] == "hi"
    assert server.stats()["requests"] == 2


def test_the_record_form_is_what_the_sdks_create_sends(module_fake_server) -> None:
    """build_body's bytes (the record, POSTed as they are) are those the SDK's public
    `chat.completions.create(model, messages, extra_body=rest)` writes: the fake
    server counts the sha256 of the bytes it reads."""
    from grumem.llm.request import request_sha

    server = module_fake_server.use({"model": "m", "default": {"content": "hi"}})
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": 'é "q" \x00 🎉'}]
    rest = {"temperature": 1e-07, "top_p": 0.95, "max_tokens": 7, "seed": 3, "grammar": "g"}

    async def go() -> None:
        async with sdk_client(server.base_url, "sk-test", 30.0, 1) as sdk:
            await sdk.chat.completions.create(model="m", messages=messages, extra_body=rest)

    asyncio.run(go())
    assert server.stats()["by_sha"] == {request_sha(build_body("m", messages, rest)): 1}


@pytest.mark.parametrize("bypassed", [False, True], ids=["proxied", "no_proxy"])
def test_a_proxy_from_the_environment_is_used_unless_no_proxy_names_the_host(
    monkeypatch, bypassed: bool
) -> None:
    """HTTP_PROXY carries the request (its absolute URL on the request line), as httpx2
    with trust_env would; NO_PROXY naming the host sends it direct."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await read_request(reader)
        seen.append(head.split(b"\r\n")[0])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
        await writer.drain()
        writer.close()

    async def go() -> tuple[int, int]:
        proxy = await asyncio.start_server(serve, "127.0.0.1", 0)
        direct = await asyncio.start_server(serve, "127.0.0.2", 0)
        proxy_port = proxy.sockets[0].getsockname()[1]
        port = direct.sockets[0].getsockname()[1]
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.2" if bypassed else "")
        try:
            async with sdk_client(f"http://127.0.0.2:{port}/v1", "sk-test", 10.0, 1) as sdk:
                r = await sdk.post(PATH, cast_to=httpx2.Response, content=b"{}")
            return r.status_code, port
        finally:
            for server in (proxy, direct):
                server.close()
                await server.wait_closed()

    status, port = asyncio.run(go())
    assert status == 200
    if bypassed:
        assert seen == [b"POST /v1/chat/completions HTTP/1.1"]
    else:
        assert seen == [f"POST http://127.0.0.2:{port}/v1/chat/completions HTTP/1.1".encode()]


# -------------------------------------------------- answers as the SDK's own

CANNED = {
    "/ok": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
    % (len(ANSWER), ANSWER),
    "/gzip": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(gzip.compress(ANSWER)), gzip.compress(ANSWER)),
    "/error": b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nRetry-After: 2\r\n"
    b"\r\nbusy",
    # a body cut short: the connection closes after 5 of 100 bytes
    "/cut": b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"cho',
    "/garbage": b"not http at all\r\n\r\n",
}


async def serve_canned(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head, _ = await read_request(reader)
    writer.write(CANNED[head.split(b" ")[1].decode()])
    await writer.drain()
    writer.close()


async def outcome(client: httpx2.AsyncClient, url: str) -> tuple:
    async with client:
        try:
            r = await client.post(url, content=b'{"x":1}')
        except Exception as e:  # the mapped httpx2 error, or aiohttp's own if unmapped
            return ("error", type(e), type(e.__cause__), str(e))
        return (r.status_code, r.content, r.headers.get("retry-after"), r.text)


@pytest.mark.parametrize("path", sorted(CANNED))
def test_the_transport_answers_as_the_sdks_own(path: str) -> None:
    """Same status, decoded body and headers, or the same mapped error with the same
    aiohttp cause (which the client's record names), as DefaultAioHttpClient."""

    async def go() -> tuple[tuple, tuple]:
        tcp = await asyncio.start_server(serve_canned, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{tcp.sockets[0].getsockname()[1]}{path}"
        try:
            ours = await outcome(httpx2.AsyncClient(transport=AiohttpTransport(4)), url)
            return ours, await outcome(openai.DefaultAioHttpClient(), url)
        finally:
            tcp.close()
            await tcp.wait_closed()

    ours, sdks = asyncio.run(go())
    assert ours == sdks
    if path in ("/ok", "/gzip"):
        assert ours[1] == ANSWER


# ------------------------------------------------------------- the body cap

CAP = 100_000
HUGE = 50_000_000


def huge(kind: str) -> tuple[bytes, bytes, int]:
    """(head, one piece of body, pieces) of a response far over CAP."""
    piece = b"x" * 65536
    pieces = HUGE // len(piece)
    if kind == "length":
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % HUGE, piece, pieces
    if kind == "close":  # no length: the body ends when the server closes
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", piece, pieces
    if kind == "chunked":
        chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunk, pieces
    # a gzip bomb: 50 MB of zeros are 50 kB on the wire, under the cap
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = bomb.compress(bytes(HUGE)) + bomb.flush()
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(data)
    return head, data, 1


async def send_huge(kind: str, delay: float) -> tuple[object, int, float]:
    """What a request to a server sending `huge(kind)` raises, how many bytes of body
    the server got written before the client hung up, and the seconds it took."""
    head, piece, pieces = huge(kind)
    written = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal written
        await read_request(reader)
        writer.write(head)
        try:
            for _ in range(pieces):
                writer.write(piece)
                await writer.drain()
                written += len(piece)
                await asyncio.sleep(delay)
        except ConnectionError:
            pass
        writer.close()

    tcp = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{tcp.sockets[0].getsockname()[1]}/v1/chat/completions"
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        async with httpx2.AsyncClient(transport=AiohttpTransport(1, cap=CAP)) as client:
            try:
                await client.post(url, content=b"{}")
                raised: object = None
            except ResponseTooLarge as e:
                raised = e
        return raised, written, loop.time() - start
    finally:
        tcp.close()
        await tcp.wait_closed()


@pytest.mark.parametrize("kind", ["close", "chunked", "gzip"])
def test_a_body_over_its_cap_is_read_no_further_than_the_cap(kind: str) -> None:
    """Without a Content-Length to refuse, or encoded (a gzip bomb): read piece by
    piece, dropped at the first piece past the cap, the connection closed."""
    raised, written, _ = asyncio.run(send_huge(kind, 0.0))
    assert isinstance(raised, ResponseTooLarge), raised
    assert (raised.status, raised.cap, raised.declared) == (200, CAP, None)
    assert CAP < raised.read <= CAP + PIECE  # one piece past it, at most
    assert f"{raised.read} bytes read are over the {CAP}-byte cap" in str(raised)
    # the server stopped once the client hung up (what the sockets' buffers held aside)
    assert written < HUGE // 4


def test_a_content_length_over_the_cap_is_refused_unread() -> None:
    """A Content-Length over the cap fails as the headers arrive: a body trickling at
    64 KiB a second (13 minutes for 50 MB) costs no time and is not read."""
    raised, written, seconds = asyncio.run(send_huge("length", 1.0))
    assert isinstance(raised, ResponseTooLarge), raised
    assert (raised.read, raised.declared) == (0, HUGE)
    assert f"its Content-Length, {HUGE} bytes, is over the {CAP}-byte cap" in str(raised)
    assert "nothing of it read" in str(raised)
    # the first piece or two, written before the close reached the server
    assert seconds < 0.9 and written < 4 * 65536


def test_the_cap_of_each_request_is_the_one_set_for_it() -> None:
    """RESPONSE_CAP, set by the caller around a request, is the cap of that request
    (and of no other); unset, the transport's own."""
    body = b"y" * 5000
    canned = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(canned)
            await writer.drain()
        writer.close()

    async def post(client: httpx2.AsyncClient, url: str, cap: int | None) -> object:
        token = RESPONSE_CAP.set(cap)
        try:
            return (await client.post(url, content=b"{}")).content
        except ResponseTooLarge as e:
            return e.cap
        finally:
            RESPONSE_CAP.reset(token)

    async def go() -> list[object]:
        tcp = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{tcp.sockets[0].getsockname()[1]}/"
        try:
            async with httpx2.AsyncClient(transport=AiohttpTransport(2, cap=4999)) as client:
                together = await asyncio.gather(post(client, url, 5000), post(client, url, 4000))
                return [*together, await post(client, url, None)]
        finally:
            tcp.close()
            await tcp.wait_closed()

    assert asyncio.run(go()) == [body, 4000, 4999]


def worst_answer(tokens: int, n: int, logprobs: bool, top: int) -> bytes:
    """A completion as large as `tokens` tokens per choice can make it: every token the
    longest of cl100k_base (128 bytes), every byte one JSON spells in 6 (ensure_ascii),
    the text twice (content and a reasoning field), full logprobs."""
    token = "\x01" * 128
    text = token * tokens

    def entry() -> dict:
        return {"token": token, "logprob": -1.2345678901234567e-10, "bytes": [255] * 128}

    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text, "reasoning_content": text},
        "finish_reason": "length",
    }
    if logprobs:
        choice["logprobs"] = {
            "content": [{**entry(), "top_logprobs": [entry() for _ in range(top)]}] * tokens
        }
    answer = {
        "id": "chatcmpl-" + "f" * 64,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "m" * 256,
        "system_fingerprint": "fp_" + "0" * 32,
        "choices": [{**choice, "index": i} for i in range(n)],
        "usage": {"prompt_tokens": 32768, "completion_tokens": tokens, "total_tokens": 99999},
    }
    return json.dumps(answer, ensure_ascii=True).encode()


@given(
    tokens=st.integers(1, 40),
    n=st.integers(1, 3),
    logprobs=st.booleans(),
    top=st.integers(0, 20),
)
@settings(max_examples=60, deadline=None)
def test_the_cap_holds_the_largest_answer_a_request_allows(
    tokens: int, n: int, logprobs: bool, top: int
) -> None:
    request = {"model": "m", "messages": [], "max_tokens": tokens, "n": n}
    if logprobs:
        request |= {"logprobs": True, "top_logprobs": top}
    cap = response_cap(request)
    assert len(worst_answer(tokens, n, logprobs, top)) <= cap
    # and it grows with what the request allows, never below the floor
    assert response_cap({**request, "max_tokens": tokens + 1}) > cap > ENVELOPE


def test_the_cap_of_the_default_request_and_of_one_naming_no_max_tokens() -> None:
    assert response_cap({"max_tokens": 512}) == 64 * 1024 + 512 * 1536 == 851_968
    assert response_cap({"max_completion_tokens": 512}) == 851_968
    assert response_cap({}) == response_cap({"max_tokens": 32768})
    assert response_cap({"max_tokens": True, "n": "2"}) == response_cap({})


# ------------------------------------------------- the pool under the client

MODEL = "fake-model"
REPLY = "<think>ok</think>\n<check>no</check>\n<update></update>\n<next>continue</next>"


def pool_body(i: int) -> str:
    return build_body(MODEL, [{"role": "user", "content": f"pool {i}"}], {"seed": i})


def test_the_pool_holds_as_many_connections_as_the_concurrency(module_fake_server, tmp_path):
    """150 in flight at once: more than aiohttp's default pool of 100 connections."""
    server = module_fake_server.use(
        {"model": MODEL, "default": {"content": REPLY}, "latency_s": 0.3}
    )
    client = LLMClient(server.base_url, cache_dir=tmp_path, concurrency=150, timeout=20, retries=0)

    async def go() -> list:
        async with client:
            return await asyncio.gather(*(client.complete(pool_body(i)) for i in range(300)))

    exchanges = asyncio.run(go())
    assert all(ex.ok for ex in exchanges)
    assert server.stats()["in_flight_max"] == 150
    assert client.counters.in_flight_max == 150
