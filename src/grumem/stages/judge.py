"""The `judge` stage: evidence labels from an LLM judge, one request per (query, chunk).

Every (query_id, chunk_sha) of the given chunk files is judged once: a chunk
that several sessions share (same rendered text, same sha) is one pair per
query, whichever session it came from. The pairs, their prompts and what an
answer makes of each are grumem.core.judge_pairs; the judge's settings
(`labels.judge` over `llm`) grumem.config.judge_settings; the requests, through
the recording client and its cache, grumem.llm.judge_requests. This module
reads the inputs, drives the requests and writes the outputs.

A pair whose answer does not parse strictly, or whose prompt does not fit
the budget, gets no label. It is written to the `unjudged` side file and
counted, never guessed; the export then refuses to run, naming the pairs
without a label. A request that failed after its retries is no result: the
job fails without writing anything, and its rerun sends only the failed
requests (the answers received are in the cache).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from grumem.config.judge_settings import JudgeSettings
from grumem.config.settings import load_queries, settings_from_args
from grumem.core.chunk_text import distinct_chunks
from grumem.core.judge_counts import format_judge_counts, judge_counts
from grumem.core.judge_pairs import judge_pairs
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import write_jsonl
from grumem.io.progress import Progress
from grumem.io.template_files import JUDGE_TEMPLATE, load_judge_template
from grumem.io.tokenizer import cl100k_tokens
from grumem.llm.job import llm_job
from grumem.llm.judge_requests import check_no_failed_request, judge_all


def run(
    chunk_paths: Sequence[str | os.PathLike[str]],
    queries_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    unjudged_path: str | os.PathLike[str],
    settings: Mapping[str, Any],
    log_path: str | os.PathLike[str] | None = None,
    label: str = "judge",
    template_path: str | os.PathLike[str] = JUDGE_TEMPLATE,
    max_in_flight: int | None = None,
) -> dict[str, int]:
    """Judge every (query, chunk) of the chunk files; write labels and the side file atomically.
    `max_in_flight` caps the requests in flight (None: the endpoints' caps)."""
    s = JudgeSettings.from_settings(settings)
    template = load_judge_template(template_path)
    queries = load_queries(queries_path)
    # a first pass, for the total
    n_chunks = sum(1 for _ in distinct_chunks(iter_sessions(chunk_paths)))
    progress = Progress(n_chunks * len(queries), label, (), "pairs", "unlabelled")
    tokens = cl100k_tokens()
    pairs = judge_pairs(distinct_chunks(iter_sessions(chunk_paths)), queries, tokens)
    outputs = [out_path, unjudged_path]
    with llm_job(s.llm, s.base_url, outputs, progress, log_path, max_in_flight) as job:

        async def work(client: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            return await judge_all(client, pairs, s, template, progress, tokens)

        (labels, unjudged), counters = job.run(work), progress.counters.snapshot()
    check_no_failed_request(unjudged, counters["requests"], out_path)
    write_jsonl(unjudged_path, unjudged, "unjudged")
    write_jsonl(out_path, labels, "label")
    return judge_counts([x["evidence"] for x in labels], [x["reason"] for x in unjudged], counters)


def main(args: argparse.Namespace) -> int:
    """`grumem judge`: a shard's labels; the summary to stderr and to `--log`."""
    settings = settings_from_args(args, labels_of=args.project)
    stats = run(
        args.chunks,
        args.queries,
        args.out,
        args.unparsed,
        settings,
        label=f"judge {args.project}",
        template_path=args.template or JUDGE_TEMPLATE,
        max_in_flight=None if args.concurrency is None else max(1, args.concurrency),
    )
    # stderr goes to --log too (cli.main), progress and this summary alike
    print(format_judge_counts(stats, args.out, args.unparsed), file=sys.stderr)
    return 0
