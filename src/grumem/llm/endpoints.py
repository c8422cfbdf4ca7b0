"""Which LLM endpoint gets a request: `llm.base_url` as one URL or a list of replicas.

- Each endpoint has its own cap of requests in flight (its `concurrency`,
  else `llm.concurrency`); a job's total is the sum of the caps, or less
  when Snakemake grants the job fewer `llm_slots`.
- A request goes to the live endpoint with the fewest requests in flight
  that has a free slot (ties: list order), and stays there for its
  retries: an attempt is "in flight" from the slot taken to the answer.
- Dead is decided by the client (grumem.llm.client): a request whose
  retries at an endpoint ended in a connection error (refused, reset, closed
  before the answer; recorded as `connection error: …`) takes that endpoint
  out for the rest of the job, and is sent again to the others. Any HTTP
  answer, a 4xx or 5xx included, means a server is there; a timeout means a
  busy one: neither takes an endpoint out. The last live endpoint is never
  taken out, so when all are down requests fail there as with one endpoint.

The endpoint is recorded per attempt but is no part of a request's bytes nor
its cache key: which replica answered changes neither replay nor the corpus.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grumem.config.settings import endpoint_url_problem
from grumem.errors import EndpointError


@dataclass(frozen=True)
class Endpoint:
    url: str
    concurrency: int  # requests in flight at most


def endpoints(base_url: str | Sequence[Any] | None, concurrency: int) -> list[Endpoint]:
    """The endpoints of a validated `llm.base_url` (none when it is null); an item
    without its own cap takes `concurrency`. A URL listed twice is an error, and so
    is one the config would refuse (credentials, a query string): checked here too
    for a client made without a config, before the SDK would see it."""
    if base_url is None:
        return []
    items = [base_url] if isinstance(base_url, str) else list(base_url)
    out: list[Endpoint] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if isinstance(item, Mapping):
            url, cap = item["url"], item.get("concurrency", concurrency)
        else:
            url, cap = item, concurrency
        problem = endpoint_url_problem(url)
        if problem is not None:
            raise EndpointError(f"llm.base_url[{i}]: {problem}")
        key = url.rstrip("/")
        if key in seen:
            raise EndpointError(
                f"llm.base_url[{i}]: {url} is listed twice (also llm.base_url[{seen[key]}]); "
                "list each endpoint once, with the concurrency it can take"
            )
        seen[key] = i
        out.append(Endpoint(url, cap))
    return out


def total_concurrency(llm: Mapping[str, Any]) -> int:
    """Requests in flight across the endpoints of the `llm` section: the sum of their
    caps (`llm.concurrency` when base_url is a URL or null). A job asks Snakemake
    for this many `llm_slots`."""
    return (
        sum(e.concurrency for e in endpoints(llm["base_url"], llm["concurrency"]))
        or (llm["concurrency"])
    )


class EndpointPool:
    """Slots of requests in flight per endpoint, under a total cap, and which are live.

    `await acquire()` waits for a slot at the live endpoint with the fewest in
    flight and returns its index; `acquire(i)` waits for a slot at endpoint `i`
    (a retry) and returns None if `i` is taken out meanwhile. Waiters are served
    first come, first served: retries bound to an endpoint before new requests."""

    def __init__(self, eps: Iterable[Endpoint], total: int | None = None):
        self.endpoints = list(eps)
        if not self.endpoints:
            raise EndpointError("no LLM endpoint to send requests to (llm.base_url)")
        self.total = total if total is not None else sum(e.concurrency for e in self.endpoints)
        if self.total < 1:
            raise EndpointError(f"requests in flight must be at least 1, not {self.total}")
        n = len(self.endpoints)
        self.in_flight = [0] * n
        self.in_flight_max = [0] * n
        self.live = [True] * n
        self.busy = 0
        self._any: deque[asyncio.Future[int | None]] = deque()
        self._bound: list[deque[asyncio.Future[int | None]]] = [deque() for _ in range(n)]

    def _pick(self) -> int | None:
        if self.busy >= self.total:
            return None
        best = None
        for i, e in enumerate(self.endpoints):
            free = self.live[i] and self.in_flight[i] < e.concurrency
            if free and (best is None or self.in_flight[i] < self.in_flight[best]):
                best = i
        return best

    def _free(self, i: int) -> bool:
        return self.busy < self.total and self.in_flight[i] < self.endpoints[i].concurrency

    def _take(self, i: int) -> int:
        self.busy += 1
        self.in_flight[i] += 1
        self.in_flight_max[i] = max(self.in_flight_max[i], self.in_flight[i])
        return i

    async def acquire(self, bound: int | None = None) -> int | None:
        if bound is None:
            if not self._any:  # first come, first served
                i = self._pick()
                if i is not None:
                    return self._take(i)
            queue = self._any
        else:
            if not self.live[bound]:
                return None
            if not self._bound[bound] and self._free(bound):
                return self._take(bound)
            queue = self._bound[bound]
        fut: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        queue.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            granted = fut.result() if fut.done() and not fut.cancelled() else None
            if granted is not None:
                self.release(granted)  # granted as it was cancelled: give it back
            elif fut in queue:
                queue.remove(fut)
            raise

    def release(self, i: int) -> None:
        self.busy -= 1
        self.in_flight[i] -= 1
        self._wake()

    def take_out(self, i: int) -> bool:
        """Take endpoint `i` out unless it is the last live one; True when another live
        endpoint is left to send to. Requests waiting to retry at `i` get None."""
        others = [j for j, up in enumerate(self.live) if up and j != i]
        if not others:
            return False
        if self.live[i]:
            self.live[i] = False
            while self._bound[i]:
                fut = self._bound[i].popleft()
                if not fut.done():
                    fut.set_result(None)
            self._wake()
        return True

    def _wake(self) -> None:
        for i, queue in enumerate(self._bound):
            while queue and self._free(i):
                fut = queue.popleft()
                if not fut.done():
                    fut.set_result(self._take(i))
        while self._any:
            pick = self._pick()
            if pick is None:
                return
            fut = self._any.popleft()
            if not fut.done():
                fut.set_result(self._take(pick))
