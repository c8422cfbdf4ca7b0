"""A processor-sharing model of a real server's generation rate (`capacity`)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass


@dataclass(eq=False)
class _Job:
    remaining: float
    done: asyncio.Future[None]


class ProcessorSharing:
    """Generation shared equally by in-flight requests, each capped per request.

    Event-driven and exact: between starts and finishes every job runs at
    min(per_request, total / n); a timer fires when the next job completes.
    """

    def __init__(self, total: float, per_request: float):
        self.total, self.per_request = total, per_request
        self.jobs: list[_Job] = []
        self.last = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def rate(self) -> float:
        return min(self.per_request, self.total / max(1, len(self.jobs)))

    async def generate(self, tokens: int) -> None:
        loop = asyncio.get_running_loop()
        if tokens <= 0 or math.isinf(self.rate()):
            return
        self._advance(loop.time())
        job = _Job(float(tokens), loop.create_future())
        self.jobs.append(job)
        self._schedule(loop)
        try:
            await job.done
        finally:
            if job in self.jobs:  # cancelled: its share goes back to the others
                self._advance(loop.time())
                self.jobs.remove(job)
                self._schedule(loop)

    def _advance(self, now: float) -> None:
        if self.jobs:
            progress = self.rate() * (now - self.last)
            for job in self.jobs:
                job.remaining -= progress
        self.last = now

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.jobs:
            first = min(job.remaining for job in self.jobs)
            self.timer = loop.call_at(self.last + max(0.0, first) / self.rate(), self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.timer = None
        self._advance(loop.time())
        # a timer may fire a hair early: finish what is within 0.1 ms of done
        slack = self.rate() * 1e-4
        for job in [j for j in self.jobs if j.remaining <= slack]:
            self.jobs.remove(job)
            if not job.done.done():
                job.done.set_result(None)
        self._schedule(loop)
