"""The judge's requests: one per (query, chunk) pair, sent through the recording client.

Requests go through the same recording client as the responses stage: the
same response cache (keyed by the request sha256, so a rerun re-sends nothing
already answered) and the same `llm.mode: replay`, which reproduces the
labels byte for byte with no server. A request that failed after its retries
is no result: `check_no_failed_request` makes the job write nothing, and its
rerun sends only the failed requests (the answers received are in the cache).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

from grumem.config.judge_settings import JudgeSettings
from grumem.core.judge_pairs import Judged, PairToJudge, by_pair, judge_answer, judge_prompt
from grumem.core.judge_pairs import unjudged as unjudged_pair
from grumem.core.recording import check_response
from grumem.core.tokens import Tokens
from grumem.errors import GrumemError
from grumem.io.progress import Progress
from grumem.llm.job import failed_requests_message
from grumem.llm.request import build_body, sampling_params
from grumem.records.response import Attempt

# Every judge request is sample 0: one judgement per pair. With temperature 0
# (the default) the seed does not matter; above 0 it keeps a rerun's request
# identical, so the cache answers it.
SEED = 0


def judge_request(s: JudgeSettings, user: str) -> str:
    """The request body asking the judge about one prompt (`user`, its user message)."""
    sampling = sampling_params(s.sampling, SEED)
    return build_body(s.model, [{"role": "user", "content": user}], sampling, s.grammar)


async def judge_pair(
    client: Any,
    pair: PairToJudge,
    s: JudgeSettings,
    template: str,
    tokens: Tokens,
    progress: Progress,
) -> Judged:
    """Ask about one pair, unless its prompt is over the budget; what its answer makes of it."""
    user = judge_prompt(template, pair.question, pair.chunk_text)
    over = pair.budget_problem(s.budget, tokens.count(user), s.max_tokens)
    if over is not None:
        return unjudged_pair(pair, "budget", None, detail=over)
    ex = await client.complete(
        judge_request(s, user), label=f"judge {pair.query_id} {pair.chunk_sha[:12]}"
    )
    sha = ex.request["sha256"]
    if not ex.ok:
        return unjudged_pair(pair, "request_failed", sha, detail=ex.failure())
    progress.answers += 1
    # the recording check of gates and export: the answer (fresh or from the cache)
    # must match its sha256, and its content comes from the raw bytes
    raw = check_response(client.cache.path(sha), None, Attempt.convert(ex.response))
    return judge_answer(pair, sha, raw, ex.response["body"], s.max_tokens, s.model)


async def judge_all(
    client: Any,
    pairs: Iterator[PairToJudge],
    s: JudgeSettings,
    template: str,
    progress: Progress,
    tokens: Tokens,
    report_every: float = 5.0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Judge a stream of pairs with the client's concurrency in flight at most; the
    client's endpoint slots cap HTTP attempts. Returns (labels, unjudged), each sorted
    by pair."""
    workers = client.concurrency
    labels: list[dict[str, Any]] = []
    unjudged: list[dict[str, Any]] = []
    # a bounded queue: only the pairs about to be sent are in memory, not the corpus
    queue: asyncio.Queue[PairToJudge | None] = asyncio.Queue(maxsize=2 * workers)

    async def produce() -> None:
        for pair in pairs:
            await queue.put(pair)
        for _ in range(workers):
            await queue.put(None)

    async def work() -> None:
        while (pair := await queue.get()) is not None:
            judged = await judge_pair(client, pair, s, template, tokens, progress)
            (labels if judged.labelled else unjudged).append(judged.record)
            progress.parsed += judged.labelled
            progress.dropped += not judged.labelled
            progress.done += 1

    progress.counters = client.counters
    reporter = asyncio.create_task(progress.report_every(report_every))
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(produce())
            for _ in range(workers):
                tg.create_task(work())
    except* GrumemError as group:
        raise group.exceptions[0] from None
    finally:
        reporter.cancel()
    progress.emit()
    return by_pair(labels), by_pair(unjudged)


def check_no_failed_request(
    unjudged: list[dict[str, Any]], sent: int, out_path: str | os.PathLike[str]
) -> None:
    """GrumemError, so that the job writes nothing, when any of its `sent` requests
    failed after their retries."""
    failed = [u for u in unjudged if u["reason"] == "request_failed"]
    if not failed:
        return
    down = (
        " Is the server at labels.judge.base_url (or llm.base_url) up?"
        if any("no response" in u["detail"] for u in failed)
        else ""
    )
    raise GrumemError(
        failed_requests_message(
            len(failed),
            sent,
            failed[0]["detail"],
            out_path,
            requests="judge requests",
            down=down,
        )
    )
