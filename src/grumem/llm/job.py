"""The setup every job that talks to the LLM shares (`responses`, `judge`): its output
places checked before a request is paid for, progress to the terminal and the
job's log, the embedded server started when no endpoint is set, one recording
client for the job, and the "requests failed" error that makes it write nothing.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from grumem.io.jsonl import check_writable
from grumem.io.progress import Progress

T = TypeVar("T")


@dataclass
class LLMJob:
    """A job's progress and the endpoints its client talks to (None in replay mode)."""

    llm: dict[str, Any]
    base_url: str | list[Any] | None
    progress: Progress
    max_in_flight: int | None = None  # the job's llm_slots; None: the endpoints' caps

    def run(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """`work(client)` in an event loop, with a client closed whatever happens."""
        return asyncio.run(self._with_client(work))

    async def _with_client(self, work: Callable[[Any], Awaitable[T]]) -> T:
        from grumem.llm.client import LLMClient

        client = LLMClient.from_config(
            self.llm, base_url=self.base_url, max_in_flight=self.max_in_flight
        )
        try:
            return await work(client)
        finally:
            await client.aclose()


@contextmanager
def llm_job(
    llm: dict[str, Any],
    base_url: str | list[Any] | None,
    outputs: Sequence[str | os.PathLike[str]],
    progress: Progress,
    log_path: str | os.PathLike[str] | None = None,
    max_in_flight: int | None = None,
) -> Iterator[LLMJob]:
    """Check that `outputs` and the cache can be written, send `progress` to stderr and
    `log_path`, and start the embedded llama.cpp server when live with no `base_url`."""
    # a read-only or missing output place is found before any request is paid for
    for path in outputs:
        check_writable(Path(path).parent)
    if llm["mode"] == "live":
        check_writable(llm["cache_dir"])
    with ExitStack() as stack:
        streams: list[IO[str]] = [sys.stderr]
        if log_path:
            streams.append(stack.enter_context(open(log_path, "a", encoding="utf-8")))
        progress.streams = streams
        if base_url is None and llm["mode"] == "live":
            from grumem.llm.local_server import LocalServer

            server = stack.enter_context(LocalServer(**llm["local"]))
            base_url = server.base_url
            progress.emit()
        yield LLMJob(llm, base_url, progress, max_in_flight)


def failed_requests_message(
    failed: int,
    sent: int,
    first: str,
    out_path: object,
    *,
    requests: str = "requests",
    kinds: str = "",
    down: str = "",
) -> str:
    """One line: how many `requests` failed after their retries (`kinds`: how), the
    first failure, a hint when the server seems down (`down`), and what to do.

    A failed request is no result: the job writes nothing, so Snakemake
    reruns it, and the answers already received are in the cache, so the
    rerun sends only the requests that failed."""
    every = f"every {requests.removesuffix('s')} failed: " if failed == sent else ""
    how = f" ({kinds})" if kinds else ""
    return (
        f"{every}{failed} of {sent} {requests} failed after their retries{how}; "
        f"the first: {first}.{down} Nothing written to {out_path}; the answers "
        "received are cached, so a rerun sends only the failed requests"
    )
