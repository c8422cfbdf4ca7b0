"""When a failed attempt is tried again (grumem.llm.retry): Retry-After read and honoured,
a status that no retry can mend, the retry budget, and a server asking for longer than
this client waits; against the fake server over real HTTP where a server is involved.
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.llm.cache import ResponseCache
from grumem.llm.request import request_sha
from grumem.llm.retry import Next, RetryPolicy, retry_after_seconds
from support.llm_client import (
    MODEL,
    REPLY,
    body_for,
    make_client,
    run_all,
)


def test_retry_after_seconds_reads_seconds_and_dates():
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("0") == 0.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past


def test_retry_after_is_honoured(module_fake_server, tmp_path):
    script = {
        "model": MODEL,
        "default": {"content": REPLY},
        "faults": {"rate": 1.0, "kinds": ["429"], "only_first": True, "retry_after": 0.6},
    }
    server = module_fake_server.use(script)
    t0 = time.monotonic()
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path, backoff=0.0), [body_for(1)]))
    assert ex.ok and [a["status"] for a in ex.attempts] == [429, 200]
    assert time.monotonic() - t0 >= 0.6


def test_non_retryable_status_ends_at_once(module_fake_server, tmp_path):
    server = module_fake_server.use(
        {"model": MODEL, "replies": [{"match": "^never$", "content": "x"}]}
    )
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body_for(1)]))
    assert not ex.ok and len(ex.attempts) == 1 and ex.response["status"] == 400
    assert "invalid_request_error" in ex.response["body"]
    assert not list(ResponseCache(tmp_path).shas())


def test_permanent_outage_fails_after_the_retry_budget(module_fake_server, tmp_path):
    server = module_fake_server.use({"model": MODEL, "default": {"content": REPLY}, "outage": True})
    body = body_for(1)
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path, retries=4), [body]))
    assert not ex.ok
    assert [a["status"] for a in ex.attempts] == [503] * 5
    assert server.stats()["by_sha"] == {request_sha(body): 5}
    message = ex.failure("traj-1/t3")
    assert request_sha(body) in message and "traj-1/t3" in message
    assert "5 attempt(s)" in message and "status 503" in message
    assert not list(ResponseCache(tmp_path).shas())


DOWN = "server asked to retry after 86400 s, more than the 300 s this client waits: treated as down"


@pytest.mark.parametrize("status", ["429", "503"])
def test_a_retry_after_beyond_the_cap_fails_at_once_naming_it(module_fake_server, tmp_path, status):
    """Retry-After: 86400 (a day): the request neither waits nor tries again there;
    its one attempt's error gives the header's value."""
    server = module_fake_server.use(
        {
            "model": MODEL,
            "default": {"content": REPLY},
            "faults": {"rate": 1.0, "kinds": [status], "retry_after": 86400},
        }
    )
    t0 = time.monotonic()
    exchanges = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body_for(1)]))
    assert time.monotonic() - t0 < 5
    (ex,) = exchanges
    assert not ex.ok and [a["status"] for a in ex.attempts] == [int(status)]
    assert ex.response["error"].startswith(f"HTTP {status}: ")
    assert ex.response["error"].endswith(DOWN)
    assert DOWN in ex.failure("t1")
    assert server.stats()["requests"] == 1
    assert not list(ResponseCache(tmp_path).shas())


def test_a_retry_after_is_read_unclamped_and_a_date_beyond_the_cap_named():
    """The header's seconds as they are (the client compares them with the cap); an
    HTTP date a day ahead is named as the date and its seconds."""
    from email.utils import format_datetime

    from grumem.llm.retry import down_for

    assert retry_after_seconds("300") == 300.0
    assert retry_after_seconds("86400") == 86400.0
    when = format_datetime(datetime.now(UTC) + timedelta(days=1), usegmt=True)
    seconds = retry_after_seconds(when)
    assert seconds is not None and 86000 < seconds <= 86400
    text = down_for(when, seconds)
    assert text.startswith(f"server asked to retry at {when} (in 86")
    assert text.endswith(" s), more than the 300 s this client waits: treated as down")


# ----------------------------------------------------------------- the policy alone

STATUSES = st.one_of(st.none(), st.sampled_from([200, 400, 401, 404, 408, 409, 422, 429]))


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 12),
    retries=st.integers(0, 8),
    status=st.one_of(STATUSES, st.integers(500, 599)),
    why=st.sampled_from([None, "HTTP 200 but the body is not JSON"]),
    down=st.booleans(),
    lost=st.booleans(),
)
def test_what_follows_a_failed_attempt(n, retries, status, why, down, lost):
    """A status no retry mends stops at once; a server that is down is never waited
    for; within the budget a retryable failure waits; past it, only a lost connection
    moves the request on; a request moves only when down or lost."""
    policy = RetryPolicy(retries, 0.5)
    step = policy.after(n, status, why, down=down, lost=lost)
    mendable = status is None or why is not None or status in (408, 409, 429) or status >= 500
    if not mendable:
        assert step is Next.STOP
    elif down:
        assert step is Next.ELSEWHERE
    elif n <= retries:
        assert step is Next.WAIT
    else:
        assert step is (Next.ELSEWHERE if lost else Next.STOP)


@given(n=st.integers(1, 40), backoff=st.floats(0, 10), cap=st.floats(0.001, 60))
def test_the_delay_is_half_to_all_of_the_capped_backoff_and_retry_after_wins(n, backoff, cap):
    """Equal jitter: never under half the backoff (no stampede at 0), never over the cap;
    a server's Retry-After is taken as it is."""
    policy = RetryPolicy(3, backoff, cap, random.Random(n))
    base = min(cap, backoff * 2.0 ** (n - 1))
    assert base / 2 <= policy.delay(n, None) <= base
    assert policy.delay(n, 7.5) == 7.5
    assert policy.delay(n, 0.0) == 0.0
