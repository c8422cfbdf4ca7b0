"""The one LLM client: sends recorded request bodies, records every attempt, caches answers.

- A request is its body string (built by `grumem.llm.request.build_body`),
  recorded before it is sent. After each attempt the bytes the SDK put on
  the wire are compared with it; a difference is an error, never a warning.
- Each attempt (grumem.llm.attempt) is recorded as the response schema's
  `attempt`; whether it is an answer is grumem.llm.answers' to say, whether
  and when it is tried again grumem.llm.retry's.
- The API key (grumem.llm.secrets) is read and checked at start-up and
  scrubbed from every error text; a response body holding it is refused
  before anything of it is recorded or cached.
- The model that answered is checked against the request's, on a cache hit
  too (grumem.llm.answers.model_accepted, `llm.accept_models`).
- `live` mode reads the cache first and writes each answer to it as it
  arrives; `replay` mode reads only the cache and a miss is an error. A
  corrupt cache entry (grumem.llm.cache) fails the request in either mode,
  naming the file and the request; live mode sets it aside first, so the
  rerun sends that request again.
- `base_url` may list several endpoints (grumem.llm.endpoints): a request
  goes to the live one with the fewest in flight and keeps to it for its
  retries; when they end in a connection error, or the server says it is
  down, that endpoint is taken out and the request starts over at another
  (attempts count from 1 again there). Each attempt records its `endpoint`;
  the cache key is the body's sha256 alone, so which endpoint answered
  changes no record a corpus reads.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grumem.errors import CorruptEntry, LLMError, ReplayMiss, WireMismatch
from grumem.llm.answers import model_accepted, model_mismatch, response_model
from grumem.llm.attempt import Outcome, attempt_record, send
from grumem.llm.cache import ResponseCache
from grumem.llm.endpoints import EndpointPool, endpoints
from grumem.llm.request import request_name, request_sha, wire_data
from grumem.llm.retry import BACKOFF_CAP, Next, RetryPolicy
from grumem.llm.secrets import ApiKey

MODES = ("live", "replay")


@dataclass(frozen=True)
class Exchange:
    request: dict[str, str]  # {"body", "sha256"}
    response: dict[str, Any]  # the last attempt
    attempts: list[dict[str, Any]]
    ok: bool
    from_cache: bool
    response_model: str | None = None  # the `model` the answer names (None: no answer)

    def failure(self, label: str = "") -> str:
        """One line saying why the request failed, naming it (for the caller's record)."""
        last = self.response
        what = f"status {last['status']}" if last["status"] is not None else "no response"
        return (
            f"{request_name(self.request['sha256'], label)} failed after "
            f"{len(self.attempts)} attempt(s): {what}: {last['error']}"
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


class LLMClient:
    """Async client for OpenAI-compatible endpoints (one, or replicas); one per process.

    `async with LLMClient(...) as llm: ex = await llm.complete(body, label)`.
    `concurrency` caps each endpoint listed without its own cap; `max_in_flight`
    caps the total (None: the sum of the caps; with one URL it is that URL's cap,
    as the job's --concurrency overrides llm.concurrency).
    """

    def __init__(
        self,
        base_url: str | Sequence[Any] | None,
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
        accept_models: Iterable[str] = (),
        max_in_flight: int | None = None,
    ):
        _check_settings(base_url, mode, concurrency, timeout, retries, backoff, max_in_flight)
        self.base_url = base_url
        self.mode = mode
        self.cache = ResponseCache(cache_dir)
        if isinstance(base_url, str) and max_in_flight is not None:
            eps = endpoints(base_url, max_in_flight)
        else:
            eps = endpoints(base_url, concurrency)
        self._pool = EndpointPool(eps, max_in_flight) if eps else None
        # requests in flight at most, across the endpoints
        self.concurrency = self._pool.total if self._pool else max_in_flight or concurrency
        self.timeout = timeout
        self.retry = RetryPolicy(retries, backoff, backoff_cap, rng or random.Random())
        self.accept_models = tuple(accept_models)
        self.counters = Counters()
        # the key lives only here and in the SDK's headers; its scrub keeps it out of errors
        self.key = ApiKey.from_env(api_key_env)
        # one SDK (and connection pool) per endpoint, in the pool's order
        self._sdks = [self._make_sdk(e.url, e.concurrency) for e in eps] if mode == "live" else []

    @property
    def retries(self) -> int:
        """Attempts after the first at an endpoint."""
        return self.retry.retries

    @classmethod
    def from_config(
        cls, llm: Mapping[str, Any], base_url: str | Sequence[Any] | None = None, **overrides: Any
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
            accept_models=llm.get("accept_models") or (),
        )
        kwargs.update(overrides)
        return cls(base_url or llm.get("base_url"), **kwargs)

    def _make_sdk(self, base_url: str, concurrency: int) -> Any:
        from grumem.llm.transport import sdk_client

        # one pool per endpoint, as large as its cap: every request in flight has a connection
        return sdk_client(
            base_url, self.key.value, self.timeout, min(concurrency, self.concurrency)
        )

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        sdks, self._sdks = self._sdks, []
        for sdk in sdks:
            await sdk.close()

    async def complete(self, body: str, label: str = "") -> Exchange:
        """The answer to one request body: from the cache, or from the server (live mode).

        Returns an Exchange with ok False when the server did not answer within
        the retry budget or refused the request; the caller records that."""
        sha = request_sha(body)
        request = {"body": body, "sha256": sha}
        self.counters.requests += 1
        try:
            # live: a corrupt entry is set aside, so the rerun sends this request again
            cached = self.cache.get(sha, set_aside=self.mode == "live")
        except CorruptEntry as e:
            raise e.for_request(label) from None
        data = wire_data(body, sha, label)
        if cached is not None:
            return self._from_cache(request, data["model"], cached, label)
        if self.mode == "replay":
            raise ReplayMiss(sha, label)
        return await self._from_server(request, data, label)

    def _from_cache(
        self, request: dict[str, str], model: str, cached: list[dict[str, Any]], label: str
    ) -> Exchange:
        sha = request["sha256"]
        for attempt in cached:
            self._refuse_key(attempt["body"] or "", sha, label, attempt["status"], True)
        answered = response_model(cached[-1]["body"])
        self._check_model(model, answered, sha, label, True)
        self.counters.cache_hits += 1
        return Exchange(request, cached[-1], cached, True, True, answered)

    async def _from_server(
        self, request: dict[str, str], data: dict[str, Any], label: str
    ) -> Exchange:
        """Attempts until an answer, or until the retry policy stops: at one endpoint,
        starting over at another when the policy moves the request and one is live."""
        from grumem.llm.transport import response_cap  # the SDK's import, live mode only

        sha = request["sha256"]
        wire = request["body"].encode("utf-8")
        cap = response_cap(data)
        attempts: list[dict[str, Any]] = []
        at: int | None = None  # the endpoint this request keeps to for its retries
        n = 0  # attempts at it
        while True:
            sent = await self._attempt(wire, at, cap)
            if sent is None:  # `at` was taken out while this request waited to retry there
                at, n = None, 0
                continue
            at, outcome, latency = sent
            n += 1
            if attempts:
                self.counters.retries += 1
            ok, why = self._judge(outcome, wire, sha, label)
            url = self._endpoint_url(at)
            attempts.append(attempt_record(n, outcome, latency, self.key.scrub(why or ""), url))
            if ok:
                return await self._answered(request, data["model"], attempts, outcome, label)
            step = self.retry.after(n, outcome.status, why, down=outcome.down, lost=outcome.lost)
            if step is Next.WAIT:
                await asyncio.sleep(self.retry.delay(n, outcome.retry_after))
            elif step is Next.ELSEWHERE and self._take_out(at, attempts, sha, label):
                at, n = None, 0
            else:
                break
        self.counters.failed += 1
        return Exchange(request, attempts[-1], attempts, ok=False, from_cache=False)

    def _judge(
        self, outcome: Outcome, wire: bytes, sha: str, label: str
    ) -> tuple[bool, str | None]:
        """(an answer, why a 200 is none) of an attempt, once its bytes sent are the
        record's and its body holds no API key."""
        if outcome.sent is not None and outcome.sent != wire:
            raise WireMismatch(
                f"{request_name(sha, label)}: the bytes sent differ from the "
                f"recorded body ({len(outcome.sent)} vs {len(wire)} bytes)"
            )
        # before anything is recorded: rewriting recorded bytes is not an option
        self._refuse_key(outcome.content or b"", sha, label, outcome.status)
        return outcome.answer()

    async def _answered(
        self,
        request: dict[str, str],
        model: str,
        attempts: list[dict[str, Any]],
        outcome: Outcome,
        label: str,
    ) -> Exchange:
        sha = request["sha256"]
        answered = response_model(outcome.content or b"")
        # a wrong model's answer is not cached: once the server is fixed,
        # a rerun must send the request again
        self._check_model(model, answered, sha, label)
        # fsync off the event loop: blocking it stalls every request in flight
        await asyncio.to_thread(self.cache.put, sha, attempts)
        self.counters.answered += 1
        return Exchange(request, attempts[-1], attempts, True, False, answered)

    def _kept(self, sha: str, cached: bool) -> str:
        if cached:
            return f"the cache entry {self.cache.path(sha)} holds it: delete that file"
        return "it was not cached"

    def _refuse_key(
        self, body: bytes | str, sha: str, label: str, status: int | None, cached: bool = False
    ) -> None:
        if self.key.echoed_in(body):
            raise self.key.echoed(request_name(sha, label), status, self._kept(sha, cached))

    def _check_model(
        self, asked: str, answered: str | None, sha: str, label: str, cached: bool = False
    ) -> None:
        if not model_accepted(asked, answered, self.accept_models):
            where, kept = request_name(sha, label), self._kept(sha, cached)
            raise model_mismatch(where, asked, answered, kept)

    async def _attempt(
        self, wire: bytes, at: int | None, cap: int
    ) -> tuple[int, Outcome, float] | None:
        """One HTTP attempt: (its endpoint, outcome, latency), timed once a slot is
        free (the wait for a slot is queueing in this client, not the server's
        latency). At endpoint `at` (a retry), else at the least busy live one;
        None when `at` is taken out before a slot there is free."""
        assert self._pool is not None
        i = await self._pool.acquire(at)
        if i is None:
            return None
        c = self.counters
        c.sent += 1
        c.in_flight += 1
        c.in_flight_max = max(c.in_flight_max, c.in_flight)
        start = time.monotonic()
        try:
            outcome = await send(self._sdks[i], wire, cap, self.timeout, self.key.scrub)
            return i, outcome, time.monotonic() - start
        finally:
            c.in_flight -= 1
            self._pool.release(i)

    def _endpoint_url(self, i: int) -> str:
        assert self._pool is not None
        return self._pool.endpoints[i].url

    def _take_out(self, i: int, attempts: list[dict[str, Any]], sha: str, label: str) -> bool:
        """Take endpoint `i` out after a request's retries there ended in a connection
        error, or the server said it is down; True when the request can go to another
        live endpoint."""
        assert self._pool is not None
        was_live = self._pool.live[i]
        if not self._pool.take_out(i):
            return False
        if was_live:
            left = sum(self._pool.live)
            print(
                f"llm: endpoint {self._endpoint_url(i)} taken out: {request_name(sha, label)} "
                f"met at its attempt {attempts[-1]['attempt']} there: {attempts[-1]['error']}; "
                f"requests go to the {left} other live endpoint(s) for the rest of this job",
                file=sys.stderr,
                flush=True,
            )
        return True


def _check_settings(
    base_url: str | Sequence[Any] | None,
    mode: str,
    concurrency: int,
    timeout: float,
    retries: int,
    backoff: float,
    max_in_flight: int | None,
) -> None:
    if mode not in MODES:
        raise LLMError(f"llm.mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == "live" and not base_url:
        raise LLMError("llm.mode live needs a base_url (or the embedded local server)")
    if concurrency < 1 or retries < 0 or timeout <= 0 or backoff < 0:
        raise LLMError("llm: concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0")
    if max_in_flight is not None and max_in_flight < 1:
        raise LLMError(f"requests in flight must be at least 1, not {max_in_flight}")
