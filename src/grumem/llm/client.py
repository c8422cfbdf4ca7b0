"""The one LLM client: sends recorded request bodies, records every attempt, caches answers.

- A request is its body string (built by `grumem.llm.request.build_body`),
  recorded before it is sent. After each attempt the bytes the SDK put on
  the wire are compared with it; a difference is an error, never a warning.
- A response attempt is recorded as the raw body (UTF-8 text; raw bytes
  that are not UTF-8 also as `body_b64`, see grumem.recording), the sha256
  of the raw bytes, HTTP status, attempt number,
  latency and error: the response schema's `attempt`, never a re-serialised
  object. Headers are never recorded (the request's carry the API key).
- The SDK's own retries are off; this loop retries connection errors,
  timeouts, 408/409/429/5xx and a 200 whose body is not a chat completion,
  with exponential backoff and jitter, honouring Retry-After.
- `live` mode reads the cache first and writes each answer to it as it
  arrives; `replay` mode reads only the cache and a miss is an error.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from grumem.errors import GrumemError
from grumem.llm.cache import ResponseCache
from grumem.llm.request import RequestError, request_sha

MODES = ("live", "replay")
NO_KEY = "sk-no-key"  # local servers ignore the key; the SDK insists on one
RETRY_STATUSES = frozenset({408, 409, 429})
BACKOFF_FACTOR = 2.0
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 300.0  # a server asking for longer than this is treated as down


class LLMError(GrumemError):
    pass


class ReplayMiss(LLMError):
    """Replay mode met a request with no cached answer."""

    def __init__(self, sha: str, label: str = ""):
        self.sha = sha
        self.label = label
        where = f" ({label})" if label else ""
        super().__init__(
            f"replay: no cached response for request {sha}{where}; run in llm.mode: live to send it"
        )


class WireMismatch(LLMError):
    """The SDK sent bytes other than the recorded body: the record would be a lie."""


@dataclass(frozen=True)
class Exchange:
    request: dict[str, str]  # {"body", "sha256"}
    response: dict[str, Any]  # the last attempt
    attempts: list[dict[str, Any]]
    ok: bool
    from_cache: bool

    def failure(self, label: str = "") -> str:
        """One line saying why the request failed, naming it (for the caller's record)."""
        last = self.response
        what = f"status {last['status']}" if last["status"] is not None else "no response"
        where = f" ({label})" if label else ""
        return (
            f"request {self.request['sha256']}{where} failed after {len(self.attempts)} "
            f"attempt(s): {what}: {last['error']}"
        )


@dataclass
class Counters:
    """Progress figures; read them, do not write them."""

    requests: int = 0  # complete() calls
    cache_hits: int = 0
    sent: int = 0  # HTTP attempts started
    retries: int = 0  # attempts after a request's first
    answered: int = 0  # requests that ended in an answer from the server
    failed: int = 0  # requests that ended without one
    in_flight: int = 0
    in_flight_max: int = 0

    def snapshot(self) -> dict[str, int]:
        return dict(self.__dict__)


def is_answer(status: int | None, content: bytes) -> tuple[bool, str | None]:
    """A final answer is HTTP 200 with a JSON body holding choices[0].message."""
    if status != 200:
        return False, None
    try:
        data = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return False, f"HTTP 200 but the body is not JSON: {e}"
    choices = data.get("choices") if isinstance(data, dict) else None
    if (
        not isinstance(choices, list)
        or not choices
        or not isinstance(choices[0], dict)
        or not isinstance(choices[0].get("message"), dict)
    ):
        return False, "HTTP 200 but the body has no choices[0].message"
    return True, None


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


@dataclass
class _Outcome:
    status: int | None
    content: bytes | None
    error: str | None
    retry_after: float | None = None
    sent: bytes | None = field(default=None, repr=False)


class LLMClient:
    """Async client for one OpenAI-compatible endpoint; make one per process.

    `async with LLMClient(...) as llm: ex = await llm.complete(body, label)`.
    """

    def __init__(
        self,
        base_url: str | None,
        *,
        cache_dir: str | os.PathLike[str],
        mode: str = "live",
        api_key_env: str = "GRUMEM_API_KEY",
        concurrency: int = 8,
        timeout: float = 120.0,
        retries: int = 5,
        backoff: float = 0.5,
        backoff_cap: float = BACKOFF_CAP,
        rng: random.Random | None = None,
    ):
        if mode not in MODES:
            raise LLMError(f"llm.mode {mode!r} is not one of {', '.join(MODES)}")
        if mode == "live" and not base_url:
            raise LLMError("llm.mode live needs a base_url (or the embedded local server)")
        if concurrency < 1 or retries < 0 or timeout <= 0 or backoff < 0:
            raise LLMError("llm: concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0")
        self.base_url = base_url
        self.mode = mode
        self.cache = ResponseCache(cache_dir)
        self.concurrency = concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.backoff_cap = backoff_cap
        self.counters = Counters()
        self._rng = rng or random.Random()
        self._sem = asyncio.Semaphore(concurrency)
        # the key lives only here and in the SDK's headers; _scrub keeps it out of errors
        self._key = os.environ.get(api_key_env) or NO_KEY
        self._sdk = self._make_sdk() if mode == "live" else None

    @classmethod
    def from_config(
        cls, llm: Mapping[str, Any], base_url: str | None = None, **overrides: Any
    ) -> LLMClient:
        """From the validated `llm` section; `base_url` overrides it (the embedded server)."""
        kwargs: dict[str, Any] = dict(
            cache_dir=llm["cache_dir"],
            mode=llm["mode"],
            api_key_env=llm["api_key_env"],
            concurrency=llm["concurrency"],
            timeout=llm["timeout"],
            retries=llm["retries"],
            backoff=llm["backoff"],
        )
        kwargs.update(overrides)
        return cls(base_url or llm.get("base_url"), **kwargs)

    def _make_sdk(self) -> Any:
        import httpx2
        import openai

        # a pool as large as the semaphore: every request in flight has a connection
        http = openai.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            ),
            timeout=httpx2.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
        )
        return openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self._key,
            max_retries=0,
            timeout=self.timeout,
            http_client=http,
        )

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.close()
            self._sdk = None

    async def complete(self, body: str, label: str = "") -> Exchange:
        """The answer to one request body: from the cache, or from the server (live mode).

        Returns an Exchange with ok False when the server did not answer within
        the retry budget or refused the request; the caller records that."""
        sha = request_sha(body)
        request = {"body": body, "sha256": sha}
        self.counters.requests += 1
        cached = self.cache.get(sha)
        if cached is not None:
            self.counters.cache_hits += 1
            return Exchange(request, cached[-1], cached, ok=True, from_cache=True)
        if self.mode == "replay":
            raise ReplayMiss(sha, label)
        model, messages, rest = _split_body(body, sha, label)
        wire = body.encode("utf-8")
        attempts: list[dict[str, Any]] = []
        for n in range(1, self.retries + 2):
            if n > 1:
                self.counters.retries += 1
            outcome, latency = await self._attempt(model, messages, rest)
            if outcome.sent is not None and outcome.sent != wire:
                raise WireMismatch(
                    f"request {sha}{_at(label)}: the bytes sent differ from the "
                    f"recorded body ({len(outcome.sent)} vs {len(wire)} bytes)"
                )
            ok, why = is_answer(outcome.status, outcome.content or b"")
            attempts.append(_attempt_record(n, outcome, latency, why))
            if ok:
                # fsync off the event loop: blocking it stalls every request in flight
                await asyncio.to_thread(self.cache.put, sha, attempts)
                self.counters.answered += 1
                return Exchange(request, attempts[-1], attempts, ok=True, from_cache=False)
            if not _retryable(outcome.status, why) or n > self.retries:
                break
            await asyncio.sleep(self._delay(n, outcome.retry_after))
        self.counters.failed += 1
        return Exchange(request, attempts[-1], attempts, ok=False, from_cache=False)

    def _delay(self, n: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        base = min(self.backoff_cap, self.backoff * BACKOFF_FACTOR ** (n - 1))
        # "equal jitter": at least half the backoff, so retries never stampede at 0
        return base / 2 + self._rng.uniform(0, base / 2)

    async def _attempt(
        self, model: str, messages: Any, rest: dict[str, Any]
    ) -> tuple[_Outcome, float]:
        """One HTTP attempt and its latency, timed once a slot is free: the wait
        for the semaphore is queueing in this client, not the server's latency."""
        async with self._sem:
            c = self.counters
            c.sent += 1
            c.in_flight += 1
            c.in_flight_max = max(c.in_flight_max, c.in_flight)
            start = time.monotonic()
            try:
                return await self._send(model, messages, rest), time.monotonic() - start
            finally:
                c.in_flight -= 1

    async def _send(self, model: str, messages: Any, rest: dict[str, Any]) -> _Outcome:
        import openai

        assert self._sdk is not None
        try:
            async with asyncio.timeout(self.timeout):
                raw = await self._sdk.chat.completions.with_raw_response.create(
                    model=model, messages=messages, extra_body=rest
                )
            status = raw.status_code
            # a 2xx/3xx other than 200 is no answer either; say so in the record
            error = None if status == 200 else f"HTTP {status}"
            return _Outcome(status, raw.content, error, None, raw.http_request.content)
        except openai.APIStatusError as e:
            r = e.response
            return _Outcome(
                r.status_code,
                r.content,
                f"HTTP {r.status_code}",
                retry_after_seconds(r.headers.get("retry-after")),
                r.request.content,
            )
        except openai.APITimeoutError as e:
            return _Outcome(
                None,
                None,
                f"timeout: no answer within {self.timeout:g} s",
                sent=e.request.content,
            )
        except TimeoutError:
            return _Outcome(None, None, f"timeout: no answer within {self.timeout:g} s")
        except openai.APIConnectionError as e:
            cause = e.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause else str(e)
            return _Outcome(
                None, None, self._scrub(f"connection error: {detail}"), sent=e.request.content
            )

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "[api key]") if self._key else text


def _split_body(body: str, sha: str, label: str) -> tuple[str, Any, dict[str, Any]]:
    """model, messages and the rest (for extra_body, which keeps its order on the wire)."""
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise RequestError(f"request {sha}{_at(label)}: body is not JSON: {e}") from None
    if not isinstance(data, dict) or "model" not in data or "messages" not in data:
        raise RequestError(f"request {sha}{_at(label)}: body needs 'model' and 'messages'")
    model, messages = data.pop("model"), data.pop("messages")
    return model, messages, data


def _attempt_record(n: int, o: _Outcome, latency: float, why: str | None) -> dict[str, Any]:
    """The response schema's `attempt`: raw body stored losslessly, sha256 of the raw bytes."""
    from grumem.recording import stored_body
    from grumem.records import sha256_bytes

    content = o.content
    return {
        "attempt": n,
        "status": o.status,
        **({"body": None} if content is None else stored_body(content)),
        "sha256": None if content is None else sha256_bytes(content),
        "latency_s": round(latency, 6),
        "error": o.error or why,
    }


def _retryable(status: int | None, why: str | None) -> bool:
    if status is None or why is not None:  # no response, or a 200 that is not an answer
        return True
    return status in RETRY_STATUSES or status >= 500


def _at(label: str) -> str:
    return f" ({label})" if label else ""
