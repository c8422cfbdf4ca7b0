"""How the recording client reaches a server: the openai SDK over a transport of our own.

The SDK is the interface (`openai.AsyncOpenAI` and its public `post`, its
exceptions); under it, `http_client=` an httpx2 client whose transport is
`AiohttpTransport`, an `httpx2.AsyncBaseTransport` over aiohttp's public client.
aiohttp, because httpx2's own pool (httpcore2) scans every pooled connection
on each request and each release, O(in flight) a request: at 1,000 in flight
that scan was most of the client's CPU; aiohttp's connector hands out a free
connection in O(1). Ours rather than the one `openai.DefaultAioHttpClient` uses
(private to the SDK, openai._vendor), because a response body has to be read
here, no further than its cap.

The response cap (`response_cap`): what a conforming server can send for a
request, from the request's own fields. The generated text is at most
`max_tokens` tokens per choice (`n` choices). A token decodes to at most
TOKEN_BYTES bytes (cl100k_base's longest token is 128 bytes, a run of spaces;
SmolLM2's is 32), and JSON spells a byte in at most 6 (`\u0001`); the text may
come twice (vLLM sends the reasoning as `reasoning` and `reasoning_content`):
1,536 bytes a token. With `logprobs`, each token adds an entry (its text
escaped, its bytes as a list of numbers, `255, ` each, a float and the keys:
LOGPROB_ENTRY, 1,536 bytes) and one more for each of `top_logprobs`.
ENVELOPE is the floor: id, model, usage, finish reasons, llama.cpp's timings
and what a proxy adds take a few KiB; 64 KiB is 16 times that. A body
without `max_tokens` (nor `max_completion_tokens`) is capped as one of
DEFAULT_TOKENS (budget.context's default: no answer outgrows the context).
Extensions that echo the prompt (vLLM's `prompt_logprobs`) are not counted:
grumem never sends them. The default request (max_tokens 512, one choice, no
logprobs) is capped at 64 KiB + 512 x 1,536 bytes = 832 KiB, while its answer
is a few KiB: the cap only stops what no request can have asked for. With
`concurrency` requests in flight a job holds at most that many capped bodies
(and one 64 KiB piece past each cap) at once.

A body over its cap is a failed attempt (ResponseTooLarge): a Content-Length
over it fails before a byte of the body is read, and a body without one (or
encoded) is read piece by piece and dropped at the first piece past the cap,
the connection closed; a body is never held whole before it is known to fit.
aiohttp decodes an encoded body (gzip, deflate; br and zstd when their
libraries are installed) as it reads it, in bounded pieces: the cap counts the
decoded bytes, which are the body recorded (as httpx2 would have decoded it).

The cap of each request is set by the client in RESPONSE_CAP (a context
variable: the SDK and httpx2 await the transport in the caller's task), else
the transport's own `cap`.
"""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import aiohttp
import httpx2
import openai

TOKEN_BYTES = 128  # the longest token of cl100k_base
ESCAPED = 6  # bytes JSON spells one byte in, at most (\u0001)
TEXT_COPIES = 2  # the text, and again as a reasoning field
LOGPROB_ENTRY = TOKEN_BYTES * (ESCAPED + 5) + 128  # text escaped, bytes as "255, ", float, keys
ENVELOPE = 64 * 1024
DEFAULT_TOKENS = 32768
PIECE = 65536  # bytes taken from aiohttp's buffer at a time

RESPONSE_CAP: ContextVar[int | None] = ContextVar("grumem_response_cap", default=None)

# the SDK's own mapping (openai.DefaultAioHttpClient), so that the SDK raises for
# each aiohttp error what it raises over its own transport; the most derived wins
_AIOHTTP_ERRORS: tuple[tuple[type[BaseException], type[httpx2.TransportError]], ...] = (
    (aiohttp.ServerTimeoutError, httpx2.TimeoutException),
    (aiohttp.SocketTimeoutError, httpx2.ReadTimeout),
    (aiohttp.ClientConnectionError, httpx2.ConnectTimeout),
    (aiohttp.ClientConnectorError, httpx2.ConnectError),
    (aiohttp.ClientPayloadError, httpx2.ReadError),
    (aiohttp.ClientProxyConnectionError, httpx2.ProxyError),
    (aiohttp.ClientHttpProxyError, httpx2.ProxyError),
    (aiohttp.NonHttpUrlClientError, httpx2.UnsupportedProtocol),
    (aiohttp.InvalidUrlClientError, httpx2.UnsupportedProtocol),
)


class ResponseTooLarge(httpx2.TransportError):
    """A response body over its cap: `read` bytes of it read (0: refused by its
    Content-Length, `declared`), `status` the HTTP status it came with."""

    def __init__(self, status: int, cap: int, read: int, declared: int | None = None):
        self.status, self.cap, self.read, self.declared = status, cap, read, declared
        if declared is not None:
            what = f"its Content-Length, {declared} bytes, is over"
            then = "nothing of it read"
        else:
            what = f"{read} bytes read are over"
            then = "the rest not read"
        super().__init__(
            f"response body too large: {what} the {cap}-byte cap for this request "
            f"({then}; the cap follows the request's max_tokens, n and logprobs: "
            "grumem.llm.transport)"
        )


def response_cap(request: Mapping[str, Any]) -> int:
    """The most bytes a response body to `request` (the parsed request body) may have."""
    tokens = _int(request.get("max_tokens"), _int(request.get("max_completion_tokens"), 0))
    tokens = tokens if tokens > 0 else DEFAULT_TOKENS
    per_token = TEXT_COPIES * TOKEN_BYTES * ESCAPED
    if request.get("logprobs") is True:
        per_token += (1 + max(0, _int(request.get("top_logprobs"), 0))) * LOGPROB_ENTRY
    return ENVELOPE + max(1, _int(request.get("n"), 1)) * tokens * per_token


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except Exception as e:
        mapped = None
        for source, target in _AIOHTTP_ERRORS:
            if isinstance(e, source) and (mapped is None or issubclass(target, mapped)):
                mapped = target
        if mapped is None:
            raise
        raise mapped(str(e)) from e


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """httpx2 requests sent by one aiohttp session of at most `connections`
    connections; each response body read whole, no further than its cap."""

    def __init__(self, connections: int, cap: int | None = None):
        self.connections = connections
        self.cap = response_cap({}) if cap is None else cap
        self._session: aiohttp.ClientSession | None = None
        # HTTP(S)_PROXY / ALL_PROXY and NO_PROXY, as httpx2 reads them: once, here (aiohttp's
        # trust_env reads them, and ~/.netrc, in a thread hop per request)
        self._proxies = urllib.request.getproxies()
        self._proxy_of: dict[tuple[str, str], str | None] = {}

    def _open(self) -> aiohttp.ClientSession:
        # made in the event loop of the first request, as aiohttp requires
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.connections,
                keepalive_timeout=5.0,  # httpx2's keep-alive expiry
                ssl=httpx2.create_ssl_context(),  # the CAs httpx2 and the SDK trust
            )
            # auto_decompress: bodies decoded as read, so that the cap counts decoded bytes
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        return self._session

    def _proxy(self, url: httpx2.URL) -> str | None:
        key = (url.scheme, url.host)
        if key not in self._proxy_of:
            proxy = self._proxies.get(url.scheme) or self._proxies.get("all")
            bypass = proxy is not None and urllib.request.proxy_bypass(url.host)
            self._proxy_of[key] = None if bypass else proxy
        return self._proxy_of[key]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        cap = RESPONSE_CAP.get() or self.cap
        timeout = request.extensions.get("timeout", {})
        content = await request.aread()
        with _mapped_errors():
            async with self._open().request(
                request.method,
                str(request.url),
                # names lower-cased, as the SDK's transport sends them
                headers=[
                    (k.decode("latin-1").lower(), v.decode("latin-1"))
                    for k, v in request.headers.raw
                ],
                data=content or None,
                allow_redirects=False,  # httpx2 follows them, as the SDK asks
                compress=False,
                timeout=aiohttp.ClientTimeout(
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                    connect=timeout.get("pool"),
                ),
                server_hostname=request.extensions.get("sni_hostname"),
                proxy=self._proxy(request.url),
            ) as response:
                body = await _read_capped(response, cap)
        return _as_httpx2(request, response, body)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _as_httpx2(
    request: httpx2.Request, response: aiohttp.ClientResponse, body: bytes
) -> httpx2.Response:
    """The httpx2 response to `request` of aiohttp's `response`, its `body` read whole."""
    extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
    if response.reason:
        extensions["reason_phrase"] = response.reason.encode()
    # the body is decoded already: httpx2 must not decode it a second time (an
    # encoding aiohttp leaves, such as "gzip, gzip", then fails as not JSON)
    headers = [(k, v) for k, v in response.raw_headers if k.lower() != b"content-encoding"]
    return httpx2.Response(
        status_code=response.status,
        headers=headers,
        content=body,
        request=request,
        extensions=extensions,
    )


async def _read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body, or ResponseTooLarge (the connection closed) at the first piece past `cap`."""
    encoded = response.headers.get("Content-Encoding", "identity").lower() != "identity"
    declared = response.content_length
    if declared is not None and not encoded:
        if declared > cap:
            response.close()
            raise ResponseTooLarge(response.status, cap, 0, declared)
        return await response.read()  # aiohttp reads no further than the Content-Length
    # no length, or the length on the wire of an encoded body: the decoded bytes are counted
    pieces: list[bytes] = []
    read = 0
    async for piece in response.content.iter_chunked(PIECE):
        read += len(piece)
        if read > cap:
            response.close()
            raise ResponseTooLarge(response.status, cap, read)
        pieces.append(piece)
    return b"".join(pieces)


def sdk_client(base_url: str, api_key: str, timeout: float, connections: int) -> openai.AsyncOpenAI:
    """The SDK's client for one endpoint over AiohttpTransport: no SDK retries (the
    recording client retries, recording each attempt), its default headers and
    redirects (openai.DefaultAsyncHttpxClient)."""
    http = openai.DefaultAsyncHttpxClient(
        transport=AiohttpTransport(connections),
        timeout=httpx2.Timeout(timeout, connect=min(timeout, 10.0)),
        # proxies from the environment go through the transport, which reads them
        trust_env=False,
    )
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, http_client=http
    )
