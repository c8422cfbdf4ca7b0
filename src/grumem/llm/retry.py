"""When a failed attempt is tried again, where, and after how long.

- The SDK's own retries are off; the client retries connection errors,
  timeouts, 408/409/429/5xx and a 200 whose body is not an answer
  (grumem.llm.answers), with exponential backoff and jitter, honouring
  Retry-After.
- A Retry-After longer than RETRY_AFTER_CAP says the server is down for this
  run: the request does not wait, and makes no more attempts there (with
  several endpoints, that one is taken out and the request starts over at
  another, as after a connection error; the last live one stays, so there
  the request fails at once). The attempt's error gives the header's value.
- A request whose retries at an endpoint ran out on a lost connection
  (refused, reset, closed) starts over at another endpoint, if one is live
  (grumem.llm.endpoints).
"""

from __future__ import annotations

import email.utils
import enum
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

RETRY_STATUSES = frozenset({408, 409, 429})
BACKOFF_FACTOR = 2.0
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 300.0  # seconds; a server asking for longer is treated as down


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


def beyond_cap(retry_after: float | None) -> bool:
    """The server asked to be retried later than this client waits: it is down for the run."""
    return retry_after is not None and retry_after > RETRY_AFTER_CAP


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


def retryable(status: int | None, why: str | None) -> bool:
    """An attempt with `status` (None: no response) and `why` (a 200 that is no answer)
    may succeed if tried again."""
    if status is None or why is not None:  # no response, or a 200 that is not an answer
        return True
    return status in RETRY_STATUSES or status >= 500


class Next(enum.Enum):
    """What a request does after a failed attempt."""

    WAIT = "wait"  # try the same endpoint again after `delay`
    ELSEWHERE = "elsewhere"  # take this endpoint out and start over at another, if one is live
    STOP = "stop"  # fail the request


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` attempts after the first at an endpoint, `backoff` seconds before the
    first of them, doubling up to `backoff_cap`."""

    retries: int
    backoff: float
    backoff_cap: float = BACKOFF_CAP
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def after(self, n: int, status: int | None, why: str | None, *, down: bool, lost: bool) -> Next:
        """What follows failed attempt `n` at an endpoint: `status` and `why` as in
        retryable; `down`: its Retry-After is beyond the cap; `lost`: no response, the
        connection refused, reset or closed."""
        if not retryable(status, why):
            return Next.STOP
        if down:  # no wait, no more attempts there
            return Next.ELSEWHERE
        if n > self.retries:
            return Next.ELSEWHERE if lost else Next.STOP
        return Next.WAIT

    def delay(self, n: int, retry_after: float | None) -> float:
        """Seconds before the attempt after attempt `n`: the server's Retry-After, else
        the backoff with jitter."""
        if retry_after is not None:
            return retry_after
        base = min(self.backoff_cap, self.backoff * BACKOFF_FACTOR ** (n - 1))
        # "equal jitter": at least half the backoff, so retries never stampede at 0
        return base / 2 + self.rng.uniform(0, base / 2)
