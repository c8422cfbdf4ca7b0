"""The openai SDK client that the recording client sends through: one prebuilt request.

Every request the recording client sends is the same POST of a recorded body to
`chat/completions`. What the SDK works out for a request without looking at its
body (default, platform and auth headers merged and normalised, the URL parsed
and joined to the base URL, the timeout resolved) is worked out once, by the
SDK's own `_build_request`, on the first request, and reused for the next ones:
about a third of the SDK's CPU per request (issue 15). Each request still goes
through the SDK's `request()`: its auth hook, the httpx2 client and its aiohttp
transport, the error mapping (APIStatusError, APITimeoutError,
APIConnectionError) and the response handling. A request the prebuilt one does
not fit (other path, headers, timeout, a retry's count header) is built by the
SDK as usual.

The transport is the SDK's own aiohttp transport (DefaultAioHttpClient's), with
one change: a response body is read whole inside the request, under the same
mapping of aiohttp's errors to httpx2's, instead of through three layers of
stream wrappers chunk by chunk (a chat completion is one small JSON body).
"""

from __future__ import annotations

from typing import Any

import httpx2
import openai
from aiohttp import ClientSession, ClientTimeout
from openai._compat import model_copy
from openai._models import FinalRequestOptions
from openai._types import NotGiven
from openai._vendor.httpx_aiohttp.transport import AiohttpTransport, map_aiohttp_exceptions

_LENGTH = b"content-length"


class PrebuiltRequestOpenAI(openai.AsyncOpenAI):
    """AsyncOpenAI whose POSTs of raw bytes to one path reuse the request the SDK built first."""

    def __init__(self, *, path: str = "/chat/completions", **kwargs: Any):
        super().__init__(**kwargs)
        self._path = path
        # post()'s own FinalRequestOptions.construct fills every default per call
        self._post_options = FinalRequestOptions.construct(method="post", url=path, content=b"")
        # (url, headers with the length's slot, the length's index, encoding, extensions)
        self._prebuilt: tuple[httpx2.URL, list, int, str, dict] | None = None

    @property
    def user_agent(self) -> str:
        # the SDK's own, which names the client's class: servers see AsyncOpenAI, as before
        return f"{openai.AsyncOpenAI.__name__}/Python {self._version}"

    async def post_bytes(self, content: bytes) -> httpx2.Response:
        """`post(path, cast_to=httpx2.Response, content=content)`, without the per-call
        options construction: the raw response, body read, no model parsed."""
        options = model_copy(self._post_options)
        options.content = content
        return await self.request(httpx2.Response, options)

    def _build_request(
        self, options: FinalRequestOptions, *, retries_taken: int = 0
    ) -> httpx2.Request:
        if not self._fits(options, retries_taken):
            return super()._build_request(options, retries_taken=retries_taken)
        if self._prebuilt is None:
            first = super()._build_request(options, retries_taken=retries_taken)
            raw = list(first.headers.raw)
            at = next(i for i, (k, _) in enumerate(raw) if k.lower() == _LENGTH)
            self._prebuilt = (first.url, raw, at, first.headers.encoding, first.extensions)
            return first
        url, raw, at, encoding, extensions = self._prebuilt
        content = options.content
        assert isinstance(content, bytes)
        headers = list(raw)
        headers[at] = (raw[at][0], b"%d" % len(content))
        # a ready stream: httpx2 neither re-encodes the body nor re-derives the headers
        request = httpx2.Request(
            "POST",
            url,
            headers=httpx2.Headers(headers, encoding),
            stream=httpx2.ByteStream(content),
            extensions=dict(extensions),
        )
        request.read()
        return request

    def _fits(self, options: FinalRequestOptions, retries_taken: int) -> bool:
        """The request is the prebuilt one with another body: nothing else of it varies."""
        return (
            retries_taken == 0
            and options.method == "post"
            and options.url == self._path
            and isinstance(options.content, bytes)
            and options.json_data is None
            and options.extra_json is None
            and options.files is None
            and not options.params
            and isinstance(options.headers, NotGiven)
            and isinstance(options.timeout, NotGiven)
            and options.follow_redirects is None
            and self._idempotency_header is None
        )


class WholeBodyTransport(AiohttpTransport):
    """The SDK's aiohttp transport, each response body read whole before it returns."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.proxy is not None:
            return await super().handle_async_request(request)
        if not isinstance(self.client, ClientSession):
            self.client = self.get_client()
        timeout = request.extensions.get("timeout", {})
        with map_aiohttp_exceptions():
            async with self.client.request(
                method=request.method,
                url=str(request.url),
                headers=[
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw
                ],
                data=request.content or None,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                timeout=ClientTimeout(
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                    connect=timeout.get("pool"),
                ),
                server_hostname=request.extensions.get("sni_hostname"),
            ) as response:
                content = await response.read()
        extensions = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        # content=: httpx2 decodes it by its Content-Encoding now, as it would a stream
        return httpx2.Response(
            status_code=response.status,
            headers=response.raw_headers,
            content=content,
            request=request,
            extensions=extensions,
        )
