"""The SDK client the recording client sends through (grumem.llm.sdk): its prebuilt
request is the one the SDK itself builds, and its transport answers as the SDK's own.

A real HTTP server on 127.0.0.1 (a bare TCP server writing canned responses byte
for byte, so that a gzip body or a connection cut mid-body is exactly that).
"""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx2
import openai
import pytest
from openai._models import FinalRequestOptions
from openai._vendor.httpx_aiohttp.transport import AiohttpTransport

from grumem.llm.request import build_body
from grumem.llm.sdk import PrebuiltRequestOpenAI, WholeBodyTransport

PATH = "/chat/completions"
BASE_URL = "http://127.0.0.1:9/v1"  # never connected to: only requests are built


def sdk_kwargs() -> dict:
    return dict(base_url=BASE_URL, api_key="sk-test", max_retries=0, timeout=30.0)


def options(content: bytes) -> FinalRequestOptions:
    # what AsyncOpenAI.post(PATH, cast_to=..., content=content) passes to request()
    return FinalRequestOptions.construct(method="post", url=PATH, content=content)


def parts(request: httpx2.Request) -> tuple:
    return (
        request.method,
        str(request.url),
        request.headers.raw,
        request.content,
        request.extensions,
    )


def test_the_prebuilt_request_is_the_one_the_sdk_builds() -> None:
    """Every request after the first reuses the first's URL and headers: each must
    still be, header for header and byte for byte, what the SDK would have built."""
    prebuilt = PrebuiltRequestOpenAI(path=PATH, **sdk_kwargs())
    plain = openai.AsyncOpenAI(**sdk_kwargs())
    bodies = [
        build_body("m", [{"role": "user", "content": text}], {"seed": i})
        for i, text in enumerate(["a", "été " * 300, "", "x" * 10_000])
    ]
    for body in bodies:
        wire = body.encode("utf-8")
        assert parts(prebuilt._build_request(options(wire))) == parts(
            plain._build_request(options(wire))
        )
    assert prebuilt._prebuilt is not None  # the later requests did take the prebuilt path
    # what the prebuilt request does not fit is built by the SDK as usual
    wire = bodies[1].encode("utf-8")
    retry = prebuilt._build_request(options(wire), retries_taken=1)
    assert parts(retry) == parts(plain._build_request(options(wire), retries_taken=1))
    assert retry.headers["x-stainless-retry-count"] == "1"
    other = FinalRequestOptions.construct(method="post", url="/models", content=wire)
    assert parts(prebuilt._build_request(other)) == parts(plain._build_request(other))


def test_post_bytes_sends_the_bytes_and_returns_the_raw_response(module_fake_server) -> None:
    server = module_fake_server.use({"model": "m", "default": {"content": "hi"}})

    async def go() -> list[httpx2.Response]:
        sdk = PrebuiltRequestOpenAI(
            path=PATH, base_url=server.base_url, api_key="sk-test", max_retries=0
        )
        async with sdk:
            return [
                await sdk.post_bytes(build_body("m", [{"role": "user", "content": c}], {}).encode())
                for c in ("one", "two")
            ]

    first, second = asyncio.run(go())
    for r, content in ((first, "one"), (second, "two")):
        assert r.status_code == 200
        assert json.loads(r.request.content)["messages"][0]["content"] == content
        assert json.loads(r.content)["choices"][0]["message"]["content"] == "hi"
    assert server.stats()["requests"] == 2


ANSWER = b'{"choices":[{"message":{"content":"ok"}}]}'
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
    head = await reader.readuntil(b"\r\n\r\n")
    path = head.split(b" ")[1].decode()
    length = next(
        (
            int(v)
            for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
            if k.lower() == b"content-length"
        ),
        0,
    )
    await reader.readexactly(length)
    writer.write(CANNED[path])
    await writer.drain()
    writer.close()


async def outcome(transport: httpx2.AsyncBaseTransport, url: str) -> tuple:
    async with httpx2.AsyncClient(transport=transport) as client:
        try:
            r = await client.post(url, content=b'{"x":1}')
        except Exception as e:  # the mapped httpx2 error, or aiohttp's own if unmapped
            return ("error", type(e), type(e.__cause__), str(e))
        return (r.status_code, r.content, r.headers.get("retry-after"), r.text)


@pytest.mark.parametrize("path", sorted(CANNED))
def test_the_whole_body_transport_answers_as_the_sdks_own(path: str) -> None:
    """Same status, decoded body and headers, or the same mapped error with the same
    aiohttp cause (which the client's record names), as DefaultAioHttpClient's transport."""

    async def go() -> tuple[tuple, tuple]:
        tcp = await asyncio.start_server(serve_canned, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{tcp.sockets[0].getsockname()[1]}{path}"
        try:
            return await outcome(WholeBodyTransport(), url), await outcome(AiohttpTransport(), url)
        finally:
            tcp.close()
            await tcp.wait_closed()

    ours, sdks = asyncio.run(go())
    assert ours == sdks
    if path in ("/ok", "/gzip"):
        assert ours[1] == ANSWER
