"""Progress of a job that talks to the LLM: items done / total, parse rate,
requests really in flight and cache hits, to the job's log and the terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any


@dataclass
class Progress:
    total: int
    label: str
    streams: Sequence[IO[str]] = ()
    unit: str = "turns"
    dropped_as: str = "aborted"  # what an item that ends without a result is called
    counters: Any = None  # the client's Counters, once it exists
    done: int = 0
    parsed: int = 0  # answers that parsed
    answers: int = 0  # answers received
    dropped: int = 0
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        rate = f"{self.parsed / self.answers:.2f}" if self.answers else "-"
        pct = 100 * self.done / self.total if self.total else 100.0
        c = self.counters
        # requests waiting for the client's semaphore are not in flight
        wire = f", in flight {c.in_flight}, cache hits {c.cache_hits}" if c is not None else ""
        return (
            f"{self.label}: {self.unit} {self.done}/{self.total} ({pct:.0f}%), parse rate {rate}"
            f"{wire}, {self.dropped_as} {self.dropped}, {time.monotonic() - self.started:.1f}s"
        )

    def emit(self) -> None:
        text = self.line()
        for s in self.streams:
            s.write(text + "\n")
            s.flush()

    async def report_every(self, seconds: float) -> None:
        """Emit until cancelled."""
        import asyncio  # only jobs that talk to the LLM run a loop: the others skip its import

        while True:
            await asyncio.sleep(seconds)
            self.emit()


class _Tee:
    """A text stream writing to several, flushing each write (a log read while the job runs)."""

    def __init__(self, *streams: IO[str]):
        self._streams = streams

    def write(self, text: str) -> int:
        for s in self._streams:
            s.write(text)
            s.flush()
        return len(text)

    def flush(self) -> None:
        for s in self._streams:
            s.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams[0], name)


@contextmanager
def stderr_also_to(log: IO[str]) -> Iterator[None]:
    """Everything written to sys.stderr meanwhile also goes to `log`: a job whose rule
    shows stderr on the terminal keeps all of it (progress, statistics, errors) in
    its {log} too."""
    saved = sys.stderr
    sys.stderr = _Tee(saved, log)
    try:
        yield
    finally:
        sys.stderr = saved
