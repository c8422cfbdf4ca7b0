"""One HTTP attempt: the recorded bytes POSTed through the SDK, what came back, its record.

- `send` POSTs the body's bytes through the SDK's public raw path and turns
  whatever happens (an answer, an HTTP error, a timeout, a lost connection,
  a body over its cap) into an Outcome; it never raises for the server's
  doing. Its error texts go through the caller's scrub (grumem.llm.secrets).
- A body larger than its cap (grumem.llm.transport.response_cap, from the
  request's max_tokens, n and logprobs) is a failed attempt with no body
  recorded, retried as its status says: the transport reads no further than
  the cap, and refuses a Content-Length over it unread.
- The record of an attempt (`attempt_record`) is the response schema's
  `attempt`: the raw body (UTF-8 text; raw bytes that are not UTF-8 also as
  `body_b64`, see grumem.core.recording), the sha256 of the raw bytes, HTTP
  status, attempt number, latency, error and endpoint, never a re-serialised
  object. Headers are never recorded (the request's carry the API key).

The SDK, httpx2 and the transport are imported on the first attempt only:
replay mode never loads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from grumem.core.json_text import sha256_bytes
from grumem.core.recording import stored_body
from grumem.llm.answers import is_answer, server_error_text
from grumem.llm.retry import beyond_cap, down_for, retry_after_seconds

CHAT_PATH = "/chat/completions"
E = TypeVar("E", bound=BaseException)


@dataclass
class Outcome:
    """What one attempt met: `status` None when no HTTP response came; `content` the
    raw body (None: none, or one over its cap); `sent` the bytes the SDK put on the wire."""

    status: int | None
    content: bytes | None
    error: str | None
    retry_after: float | None = None
    sent: bytes | None = field(default=None, repr=False)
    too_large: bool = False  # a body over its cap, not read whole (content None)

    @property
    def lost(self) -> bool:
        """No HTTP response: the connection was refused, reset or closed (not a timeout)."""
        return self.status is None and (self.error or "").startswith("connection error")

    @property
    def down(self) -> bool:
        """The server asked to be retried later than this client waits."""
        return beyond_cap(self.retry_after)

    def answer(self) -> tuple[bool, str | None]:
        """(an answer, why a 200 is none): is_answer of the body; a body over its cap is
        none, retried as its status says."""
        if self.too_large:  # no body to judge
            return False, self.error if self.status == 200 else None
        return is_answer(self.status, self.content or b"")


def attempt_record(
    n: int, o: Outcome, latency: float, why: str | None, endpoint: str
) -> dict[str, Any]:
    """The response schema's `attempt`: raw body stored losslessly, sha256 of the raw bytes,
    and the endpoint it was sent to (no part of the request, nor of its cache key)."""
    content = o.content
    return {
        "attempt": n,
        "status": o.status,
        **({"body": None} if content is None else stored_body(content)),
        "sha256": None if content is None else sha256_bytes(content),
        "latency_s": round(latency, 6),
        "error": o.error or why or None,
        "endpoint": endpoint,
    }


async def send(
    sdk: Any, wire: bytes, cap: int, timeout: float, scrub: Callable[[str], str]
) -> Outcome:
    """POST the recorded bytes through the SDK's raw path (`post` with `content=`,
    `cast_to=httpx2.Response`): no request model to transform and serialise, no
    response model to build (the body is the record). `cap`: the body's cap;
    `timeout`: seconds for the whole attempt."""
    import httpx2
    import openai

    from grumem.llm.transport import RESPONSE_CAP, ResponseTooLarge

    token = RESPONSE_CAP.set(cap)
    try:
        async with asyncio.timeout(timeout):
            r = await sdk.post(CHAT_PATH, cast_to=httpx2.Response, content=wire)
        status = r.status_code
        # a 2xx/3xx other than 200 is no answer either; say so in the record
        error = None if status == 200 else scrub(server_error_text(status, r.content))
        return Outcome(status, r.content, error, None, r.request.content)
    except openai.APIStatusError as e:
        return _refused(e.response, scrub)
    except ResponseTooLarge as e:  # should the SDK let it through unwrapped
        return _too_large(e, None, scrub)
    except openai.APITimeoutError as e:
        lost = _lost_connection(e)
        if lost is not None:
            return Outcome(None, None, scrub(lost), sent=e.request.content)
        return Outcome(None, None, _timed_out(timeout), sent=e.request.content)
    except TimeoutError:
        return Outcome(None, None, _timed_out(timeout))
    except openai.APIConnectionError as e:
        big = _cause(e, ResponseTooLarge)
        if big is not None:
            return _too_large(big, e.request.content, scrub)
        return Outcome(None, None, scrub(_connection_error(e)), sent=e.request.content)
    finally:
        RESPONSE_CAP.reset(token)


def _refused(r: Any, scrub: Callable[[str], str]) -> Outcome:
    """The outcome of an HTTP error response `r` (an httpx2.Response), its Retry-After
    read, and named in the error when it is beyond the cap."""
    error = scrub(server_error_text(r.status_code, r.content))
    header = r.headers.get("retry-after")
    retry_after = retry_after_seconds(header)
    if header is not None and retry_after is not None and beyond_cap(retry_after):
        error = f"{error}; {scrub(down_for(header, retry_after))}"
    return Outcome(r.status_code, r.content, error, retry_after, r.request.content)


def _too_large(e: Any, sent: bytes | None, scrub: Callable[[str], str]) -> Outcome:
    """The outcome of a body over its cap (a grumem.llm.transport.ResponseTooLarge)."""
    error = scrub(f"HTTP {e.status}: {e}")
    return Outcome(e.status, None, error, sent=sent, too_large=True)


def _timed_out(timeout: float) -> str:
    return f"timeout: no answer within {timeout:g} s"


def _lost_connection(e: BaseException) -> str | None:
    """The connection error behind an APITimeoutError that was none, else None.

    The transport (grumem.llm.transport, mapping errors as the SDK's own aiohttp
    transport does) maps every aiohttp.ClientConnectionError (refused, reset,
    server disconnected) to httpx2.ConnectTimeout, so the SDK raises
    APITimeoutError for them: the record must still say `connection error`. A
    real timeout is a TimeoutError under the wrappers (aiohttp's are)."""
    cause = _transport_cause(e)
    if cause is None or isinstance(cause, TimeoutError):
        return None
    return f"connection error: {type(cause).__name__}: {cause}"


def _connection_error(e: BaseException) -> str:
    cause = _transport_cause(e) or e.__cause__
    detail = f"{type(cause).__name__}: {cause}" if cause else str(e)
    return f"connection error: {detail}"


def _cause(e: BaseException, kind: type[E]) -> E | None:
    """The first error of type `kind` in the chain under `e` (raised from or during it)."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _transport_cause(e: BaseException) -> BaseException | None:
    """The first error under the SDK's and httpx2's wrappers (raised `from` it or
    while handling it): the transport's own, which says what happened; None if none."""
    import httpx2
    import openai

    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        if not isinstance(cause, (openai.OpenAIError, httpx2.HTTPError)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
