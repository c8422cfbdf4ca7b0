"""The one LLM client: sends recorded request bodies, records every attempt, caches answers.

- A request is its body string (built by `grumem.llm.request.build_body`),
  recorded before it is sent. After each attempt the bytes the SDK put on
  the wire are compared with it; a difference is an error, never a warning.
- A response attempt is recorded as the raw body (UTF-8 text; raw bytes
  that are not UTF-8 also as `body_b64`, see grumem.core.recording), the sha256
  of the raw bytes, HTTP status, attempt number,
  latency and error: the response schema's `attempt`, never a re-serialised
  object. Headers are never recorded (the request's carry the API key).
- The SDK's own retries are off; this loop retries connection errors,
  timeouts, 408/409/429/5xx and a 200 whose body is not an answer (no
  non-empty `choices[0].message.content` nor `refusal`), with exponential
  backoff and jitter, honouring Retry-After. A non-200 attempt's error names
  the server's own error text ("HTTP 404: The model … does not exist").
- A Retry-After longer than RETRY_AFTER_CAP says the server is down for this
  run: the request does not wait, and makes no more attempts there (with
  several endpoints, that one is taken out and the request starts over at
  another, as after a connection error; the last live one stays, so there
  the request fails at once). The attempt's error gives the header's value.
- A response body larger than its cap (grumem.llm.transport.response_cap,
  from the request's max_tokens, n and logprobs) is a failed attempt with no
  body recorded, retried as its status says: the transport reads no further
  than the cap, and refuses a Content-Length over it unread.
- The API key is checked at start-up (printable ASCII, no control character:
  a trailing newline would end up quoted in the SDK's header error) and every
  form of it (raw, repr, bytes repr, JSON, URL-encoded) is scrubbed from
  error texts. A response body holding the key (a server echoing the
  Authorization header) is refused: never cached, never recorded.
- The model that answered is checked against the request's: a mismatch is an
  error unless `llm.accept_models` allows the name (servers that rename).
- `live` mode reads the cache first and writes each answer to it as it
  arrives; `replay` mode reads only the cache and a miss is an error. A
  corrupt cache entry (grumem.llm.cache) fails the request in either mode,
  naming the file and the request; live mode sets it aside first, so the
  rerun sends that request again.
- `base_url` may list several endpoints (grumem.llm.endpoints): a request
  goes to the live one with the fewest in flight and keeps to it for its
  retries; when they end in a connection error, that endpoint is taken out
  and the request starts over at another (attempts count from 1 again
  there). Each attempt records its `endpoint`; the cache key is the body's
  sha256 alone, so which endpoint answered changes no record a corpus reads.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

from grumem.config.settings import ENV_VAR_NAME
from grumem.core.json_text import stdlib_loads
from grumem.errors import (
    CorruptEntry,
    KeyInResponse,
    LLMError,
    ModelMismatch,
    ReplayMiss,
    RequestError,
    WireMismatch,
)
from grumem.llm.cache import ResponseCache
from grumem.llm.endpoints import EndpointPool, endpoints
from grumem.llm.request import request_sha

MODES = ("live", "replay")
NO_KEY = "sk-no-key"  # local servers ignore the key; the SDK insists on one
RETRY_STATUSES = frozenset({408, 409, 429})
BACKOFF_FACTOR = 2.0
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 300.0  # seconds; a server asking for longer is treated as down
SERVER_ERROR_CHARS = 300  # of a server's error text shown in an attempt's error
CHAT_PATH = "/chat/completions"
E = TypeVar("E", bound=BaseException)


def read_api_key(env_name: str) -> str:
    """The API key from the environment variable `env_name`; NO_KEY when unset or empty.

    Never shows the value: a name that is not a variable name may be a key
    pasted in its place, and a key with a control character (a trailing
    newline from `$(cat keyfile)`) would be quoted in full by the SDK's
    "Illegal header value" error."""
    if not ENV_VAR_NAME.match(env_name):
        raise LLMError(
            "llm.api_key_env must be the NAME of an environment variable "
            "(letters, digits, _; not starting with a digit); the value given is not "
            "shown, in case it is the key itself"
        )
    key = os.environ.get(env_name)
    if not key:
        return NO_KEY
    for i, ch in enumerate(key, start=1):
        if not "!" <= ch <= "~":
            what = f"U+{ord(ch):04X}" if ch.isascii() else "a non-ASCII character"
            raise LLMError(
                f"the API key in ${env_name} has {what} at character {i} of {len(key)} "
                "(a trailing newline from a key file?); API keys are printable ASCII "
                "without spaces: strip it (export "
                f"{env_name}=\"$(tr -d '[:space:]' < keyfile)\"); the key is not shown"
            )
    return key


def secret_forms(key: str) -> tuple[str, ...]:
    """Every way an error text or a body may spell the key, longest first."""
    raw = key.encode("utf-8", "backslashreplace")
    forms = {
        key,
        key.strip(),
        repr(key)[1:-1],
        key.encode("unicode_escape").decode("ascii"),
        repr(raw)[2:-1],
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        quote(key, safe=""),
        quote(key),
        quote_plus(key),
    }
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


def scrub(text: str, forms: Iterable[str]) -> str:
    for form in forms:
        text = text.replace(form, "[api key]")
    return text


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
    """A final answer is HTTP 200 with a JSON body whose choices[0].message holds a
    non-empty string `content`, or a non-empty string `refusal` (OpenAI's documented
    field for a model that declines: a decision of the model, recorded as such).

    Anything else (empty `choices`, `content: null` or "", a text/event-stream
    body) is a failed attempt: retried, never cached, so that a server fault is
    never replayed forever as the model's format failure."""
    if status != 200:
        return False, None
    try:
        data = stdlib_loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        if content.lstrip().startswith((b"data:", b"event:", b":")):
            return False, "HTTP 200 but the body is a text/event-stream, not one JSON completion"
        return False, f"HTTP 200 but the body is not JSON: {e}"
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        return False, "HTTP 200 but the body has no choices[0].message (no choices)"
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        return False, "HTTP 200 but the body has no choices[0].message"
    for name in ("content", "refusal"):
        value = message.get(name)
        if isinstance(value, str) and value:
            return True, None
    shown = json.dumps(message.get("content"))[:40]
    return False, f"HTTP 200 but choices[0].message.content is {shown}, not a non-empty string"


def server_error_text(status: int, content: bytes | None) -> str:
    """`HTTP <status>` and the server's own error text, on one line: OpenAI's
    {"error": {"message"}}, vLLM's {"message"}, FastAPI's {"detail"}, else the body."""
    text = ""
    if content:
        try:
            data = stdlib_loads(content)
        except (UnicodeDecodeError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                error = error.get("message")
            for value in (error, data.get("message"), data.get("detail")):
                if isinstance(value, str) and value.strip():
                    text = value
                    break
        if not text:
            text = content.decode("utf-8", errors="replace")
    text = " ".join(text.split())
    if len(text) > SERVER_ERROR_CHARS:
        text = text[: SERVER_ERROR_CHARS - 1] + "…"
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


def response_model(content: bytes | str) -> str | None:
    """The `model` an answer names; None when the body names none."""
    try:
        data = stdlib_loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def model_accepted(asked: str, answered: str | None, accept: Iterable[str]) -> bool:
    """The answer's model is the one asked for, or allowed by `llm.accept_models`:
    an exact name, or a prefix rule ending in `*` (`*` alone accepts any name)."""
    if answered == asked:
        return True
    if answered is None:
        return "*" in accept
    return any(
        answered.startswith(rule[:-1]) if rule.endswith("*") else answered == rule
        for rule in accept
    )


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds from now (delta-seconds, or an HTTP date; a past date is 0);
    None when absent or unreadable."""
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
    return max(seconds, 0.0)


def down_for(value: str, seconds: float) -> str:
    """The error text of a Retry-After (header `value`, `seconds` from now) beyond the cap."""
    value = value.strip()
    try:
        float(value)
        asked = f"after {value} s"
    except ValueError:
        asked = f"at {value} (in {seconds:.0f} s)"
    return (
        f"server asked to retry {asked}, more than the {RETRY_AFTER_CAP:g} s this client "
        "waits: treated as down"
    )


@dataclass
class _Outcome:
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
        return self.retry_after is not None and self.retry_after > RETRY_AFTER_CAP


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
        if mode not in MODES:
            raise LLMError(f"llm.mode {mode!r} is not one of {', '.join(MODES)}")
        if mode == "live" and not base_url:
            raise LLMError("llm.mode live needs a base_url (or the embedded local server)")
        if concurrency < 1 or retries < 0 or timeout <= 0 or backoff < 0:
            raise LLMError("llm: concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0")
        if max_in_flight is not None and max_in_flight < 1:
            raise LLMError(f"requests in flight must be at least 1, not {max_in_flight}")
        self.base_url = base_url
        self.mode = mode
        self.cache = ResponseCache(cache_dir)
        one_url = isinstance(base_url, str) and max_in_flight is not None
        eps = endpoints(base_url, max_in_flight if one_url else concurrency)
        self._pool = EndpointPool(eps, max_in_flight) if eps else None
        # requests in flight at most, across the endpoints
        self.concurrency = self._pool.total if self._pool else max_in_flight or concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.backoff_cap = backoff_cap
        self.accept_models = tuple(accept_models)
        self.counters = Counters()
        self._rng = rng or random.Random()
        # the key lives only here and in the SDK's headers; _scrub keeps it out of errors
        self._key_env = api_key_env
        self._key = read_api_key(api_key_env)
        self._key_forms = () if self._key == NO_KEY else secret_forms(self._key)
        # one SDK (and connection pool) per endpoint, in the pool's order
        self._sdks = [self._make_sdk(e.url, e.concurrency) for e in eps] if mode == "live" else []

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
        return sdk_client(base_url, self._key, self.timeout, min(concurrency, self.concurrency))

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
        data = _body_data(body, sha, label)
        model = data["model"]
        if cached is not None:
            for attempt in cached:
                self._refuse_key(attempt["body"] or "", sha, label, attempt["status"], True)
            answered = response_model(cached[-1]["body"])
            self._check_model(model, answered, sha, label, True)
            self.counters.cache_hits += 1
            return Exchange(request, cached[-1], cached, True, True, answered)
        if self.mode == "replay":
            raise ReplayMiss(sha, label)
        from grumem.llm.transport import response_cap  # the SDK's import, live mode only

        wire = body.encode("utf-8")
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
            if outcome.sent is not None and outcome.sent != wire:
                raise WireMismatch(
                    f"request {sha}{_at(label)}: the bytes sent differ from the "
                    f"recorded body ({len(outcome.sent)} vs {len(wire)} bytes)"
                )
            # before anything is recorded: rewriting recorded bytes is not an option
            self._refuse_key(outcome.content or b"", sha, label, outcome.status)
            if outcome.too_large:  # no body to judge; retried as its status says
                ok, why = False, outcome.error if outcome.status == 200 else None
            else:
                ok, why = is_answer(outcome.status, outcome.content or b"")
            url = self._endpoint_url(at)
            attempts.append(_attempt_record(n, outcome, latency, self._scrub(why or ""), url))
            if ok:
                answered = response_model(outcome.content or b"")
                # a wrong model's answer is not cached: once the server is fixed,
                # a rerun must send the request again
                self._check_model(model, answered, sha, label)
                # fsync off the event loop: blocking it stalls every request in flight
                await asyncio.to_thread(self.cache.put, sha, attempts)
                self.counters.answered += 1
                return Exchange(request, attempts[-1], attempts, True, False, answered)
            if not _retryable(outcome.status, why):
                break
            if outcome.down:  # no wait, no more attempts there
                if self._take_out(at, attempts, sha, label):
                    at, n = None, 0
                    continue
                break
            if n > self.retries:
                if outcome.lost and self._take_out(at, attempts, sha, label):
                    at, n = None, 0
                    continue
                break
            await asyncio.sleep(self._delay(n, outcome.retry_after))
        self.counters.failed += 1
        return Exchange(request, attempts[-1], attempts, ok=False, from_cache=False)

    def _kept(self, sha: str, cached: bool) -> str:
        if cached:
            return f"the cache entry {self.cache.path(sha)} holds it: delete that file"
        return "it was not cached"

    def _refuse_key(
        self, body: bytes | str, sha: str, label: str, status: int | None, cached: bool = False
    ) -> None:
        if not self._key_forms:
            return
        if isinstance(body, bytes):
            found = any(f.encode("utf-8") in body for f in self._key_forms)
        else:
            found = any(f in body for f in self._key_forms)
        if found:
            raise KeyInResponse(
                f"request {sha}{_at(label)}: the response (HTTP {status}) contains the API "
                f"key of ${self._key_env}; nothing of it was recorded and "
                f"{self._kept(sha, cached)}. The server (or a proxy) echoes the Authorization "
                "header: fix it before running again, and rotate the key if the server is "
                "not yours"
            )

    def _check_model(
        self, asked: str, answered: str | None, sha: str, label: str, cached: bool = False
    ) -> None:
        if model_accepted(asked, answered, self.accept_models):
            return
        named = "names no model" if answered is None else f"is from model {answered!r}"
        allow = "'*'" if answered is None else f"{answered!r} (or a prefix rule such as 'name*')"
        raise ModelMismatch(
            f"request {sha}{_at(label)} asked for model {asked!r} but the answer {named}; "
            f"{self._kept(sha, cached)}. Point llm.base_url at a server that serves that "
            f"model, or, if the server only renames it (vLLM --served-model-name), add {allow} to "
            "llm.accept_models"
        )

    def _delay(self, n: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        base = min(self.backoff_cap, self.backoff * BACKOFF_FACTOR ** (n - 1))
        # "equal jitter": at least half the backoff, so retries never stampede at 0
        return base / 2 + self._rng.uniform(0, base / 2)

    async def _attempt(
        self, wire: bytes, at: int | None, cap: int
    ) -> tuple[int, _Outcome, float] | None:
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
            return i, await self._send(wire, self._sdks[i], cap), time.monotonic() - start
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
                f"llm: endpoint {self._endpoint_url(i)} taken out: request {sha}{_at(label)} "
                f"met at its attempt {attempts[-1]['attempt']} there: {attempts[-1]['error']}; "
                f"requests go to the {left} other live endpoint(s) for the rest of this job",
                file=sys.stderr,
                flush=True,
            )
        return True

    async def _send(self, wire: bytes, sdk: Any, cap: int) -> _Outcome:
        """POST the recorded bytes through the SDK's raw path (`post` with `content=`,
        `cast_to=httpx2.Response`): no request model to transform and serialise, no
        response model to build (the body is the record). `cap`: the body's cap."""
        import httpx2
        import openai

        from grumem.llm.transport import RESPONSE_CAP, ResponseTooLarge

        token = RESPONSE_CAP.set(cap)
        try:
            async with asyncio.timeout(self.timeout):
                r = await sdk.post(CHAT_PATH, cast_to=httpx2.Response, content=wire)
            status = r.status_code
            # a 2xx/3xx other than 200 is no answer either; say so in the record
            error = None if status == 200 else self._scrub(server_error_text(status, r.content))
            return _Outcome(status, r.content, error, None, r.request.content)
        except openai.APIStatusError as e:
            r = e.response
            error = self._scrub(server_error_text(r.status_code, r.content))
            header = r.headers.get("retry-after")
            retry_after = retry_after_seconds(header)
            if header is not None and retry_after is not None and retry_after > RETRY_AFTER_CAP:
                error = f"{error}; {self._scrub(down_for(header, retry_after))}"
            return _Outcome(r.status_code, r.content, error, retry_after, r.request.content)
        except ResponseTooLarge as e:  # should the SDK let it through unwrapped
            return self._too_large(e, None)
        except openai.APITimeoutError as e:
            lost = _lost_connection(e)
            if lost is not None:
                return _Outcome(None, None, self._scrub(lost), sent=e.request.content)
            return _Outcome(
                None,
                None,
                f"timeout: no answer within {self.timeout:g} s",
                sent=e.request.content,
            )
        except TimeoutError:
            return _Outcome(None, None, f"timeout: no answer within {self.timeout:g} s")
        except openai.APIConnectionError as e:
            big = _cause(e, ResponseTooLarge)
            if big is not None:
                return self._too_large(big, e.request.content)
            return _Outcome(None, None, self._scrub(_connection_error(e)), sent=e.request.content)
        finally:
            RESPONSE_CAP.reset(token)

    def _too_large(self, e: Any, sent: bytes | None) -> _Outcome:
        """The outcome of a body over its cap (a grumem.llm.transport.ResponseTooLarge)."""
        error = self._scrub(f"HTTP {e.status}: {e}")
        return _Outcome(e.status, None, error, sent=sent, too_large=True)

    def _scrub(self, text: str) -> str:
        return scrub(text, self._key_forms)


def _body_data(body: str, sha: str, label: str) -> dict[str, Any]:
    """The body parsed, once it is known to be in the form build_body writes.

    That form (compact JSON, UTF-8 unescaped, key order kept, no NaN) is what
    the SDK's `chat.completions.create(model, messages, extra_body=rest)` puts
    on the wire (tests/test_llm_transport.py sends both to a server and
    compares); the client POSTs the bytes as they are, so a body in any other
    form (spaces, escaped non-ASCII, NaN) is refused here, before it is sent,
    rather than recorded as something the SDK would never have sent."""
    try:
        data = stdlib_loads(body)
    except json.JSONDecodeError as e:
        raise RequestError(f"request {sha}{_at(label)}: body is not JSON: {e}") from None
    if not isinstance(data, dict) or "model" not in data or "messages" not in data:
        raise RequestError(f"request {sha}{_at(label)}: body needs 'model' and 'messages'")
    try:
        wire_form = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as e:
        raise WireMismatch(f"request {sha}{_at(label)}: the SDK would not send it: {e}") from None
    if wire_form != body:
        raise WireMismatch(
            f"request {sha}{_at(label)}: the body is not in the SDK's wire form (compact "
            f"JSON, UTF-8 unescaped): the SDK would send {len(wire_form.encode())} bytes, the "
            f"record has {len(body.encode())}; build it with grumem.llm.request.build_body"
        )
    return data


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


def _attempt_record(
    n: int, o: _Outcome, latency: float, why: str | None, endpoint: str
) -> dict[str, Any]:
    """The response schema's `attempt`: raw body stored losslessly, sha256 of the raw bytes,
    and the endpoint it was sent to (no part of the request, nor of its cache key)."""
    from grumem.core.json_text import sha256_bytes
    from grumem.core.recording import stored_body

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


def _retryable(status: int | None, why: str | None) -> bool:
    if status is None or why is not None:  # no response, or a 200 that is not an answer
        return True
    return status in RETRY_STATUSES or status >= 500


def _at(label: str) -> str:
    return f" ({label})" if label else ""
