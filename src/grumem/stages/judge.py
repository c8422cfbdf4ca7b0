"""The `judge` stage: evidence labels from an LLM judge, one request per (query, chunk).

Every (query_id, chunk_sha) of the given chunk files is judged once: a chunk
that several sessions share (same rendered text, same sha) is one pair per
query, whichever session it came from. The judge sees the question and the
chunk rendered exactly as the memory agent sees it (grumem.core.chunk_text), through
templates/judge.txt, and answers `<think>…</think><evidence>yes|no</evidence>`.

Requests go through the same job setup (grumem.llm.job) and recording client
as the responses stage: the same response cache (keyed by the request sha256,
so a rerun re-sends nothing already answered) and the same `llm.mode: replay`,
which reproduces labels.jsonl byte for byte with no server. The judge's
endpoint, model and sampling may differ from the responses stage's
(`labels.judge`); a null field there takes the `llm` section's value.

A pair whose answer does not parse strictly, or whose prompt does not fit
the budget, gets no label. It is written to the `unjudged` side file and
counted, never guessed; the export then refuses to run, naming the pairs
without a label. A request that failed after its retries is no result: the
job fails without writing anything, and its rerun sends only the failed
requests (the answers received are in the cache).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grumem.config.settings import (
    load_queries,
    settings_from_args,
)
from grumem.core.chunk_text import distinct_chunks
from grumem.core.gate_parser import MAX_RAW
from grumem.core.grammar import grammar_fields
from grumem.core.judge_counts import format_judge_counts, judge_counts
from grumem.core.judge_parser import parse_judge_response
from grumem.core.recording import NOT_A_CHAT_COMPLETION, chat_content, check_response
from grumem.core.template import Budget, check_budget, fill
from grumem.core.tokens import Tokens
from grumem.errors import BudgetError, GrumemError, ParseError, TemplateError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import write_jsonl
from grumem.io.paths import TEMPLATES_DIR
from grumem.io.progress import Progress
from grumem.io.template_files import load_template
from grumem.io.tokenizer import cl100k_tokens
from grumem.llm.job import failed_requests_message, llm_job
from grumem.llm.request import build_body, sampling_params
from grumem.records.response import Attempt

JUDGE_TEMPLATE = TEMPLATES_DIR / "judge.txt"
SLOTS = ("prompt", "chunk")
# Every judge request is sample 0: one judgement per pair. With temperature 0
# (the default) the seed does not matter; above 0 it keeps a rerun's request
# identical, so the cache answers it.
SEED = 0
# Tokens kept for the tags around the think text when its length is bounded.
TAG_TOKENS = 20
# Conservative: SmolLM2 averages 4.4 characters a token on English prose, but
# about 2.5 on tool output it copies (`npm ERR! ` lines), which is what it rambles.
CHARS_PER_TOKEN = 2.0


# ------------------------------------------------------------------ the prompt


def load_judge_template(path: str | os.PathLike[str] = JUDGE_TEMPLATE) -> str:
    """Read a judge template: `{prompt}` and `{chunk}` exactly once each, no `{memory}`."""
    text = load_template(path, SLOTS)
    if "{memory}" in text:
        raise TemplateError(f"{path}: a judge template has no {{memory}} slot")
    return text


def judge_prompt(template: str, question: str, chunk_text: str) -> str:
    """The judge's user message, slots filled in one pass (grumem.core.template.fill): a question
    holding `{chunk}` or a chunk holding `{prompt}` stays literal."""
    return fill(template, {"prompt": question, "chunk": chunk_text})


# ------------------------------------------------------------------ settings


@dataclass(frozen=True)
class JudgeSettings:
    """The judge's endpoint, model, sampling and grammar, resolved against `llm`."""

    model: str
    base_url: str | list[Any] | None
    mode: str
    server_kind: str
    sampling: dict[str, Any]
    grammar: dict[str, Any]
    llm: dict[str, Any]  # the llm section with the judge's base_url and model in it
    budget: Budget

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> JudgeSettings:
        llm, judge = settings["llm"], settings["labels"]["judge"]

        def pick(key: str) -> Any:
            return llm[key] if judge[key] is None else judge[key]

        model, base_url, server_kind = pick("model"), pick("base_url"), pick("server_kind")
        use_grammar = pick("grammar")
        sampling = sampling_params(
            {k: judge[k] for k in ("temperature", "top_p", "max_tokens")}, SEED
        )
        return cls(
            model=model,
            base_url=base_url,
            mode=llm["mode"],
            server_kind=server_kind,
            sampling=sampling,
            grammar=(
                grammar_fields(server_kind, "judge", think_chars(sampling["max_tokens"]))
                if use_grammar
                else {}
            ),
            llm={**llm, "base_url": base_url, "model": model},
            budget=Budget.from_config(settings["budget"]),
        )

    @property
    def max_tokens(self) -> int:
        return self.sampling["max_tokens"]


def think_chars(max_tokens: int) -> int:
    """The grammar's bound on the think text, so that a whole answer fits max_tokens.

    Unbounded, a small model rambles inside <think> until max_tokens cuts
    the answer before <evidence> (measured with SmolLM2-135M: 5 of 6 answers
    cut at 64 tokens, 4 of 10 at 200). The judge's label comes from
    <evidence> alone, so ending the reasoning early costs nothing that a cut
    answer would have kept."""
    return max(1, int((max_tokens - TAG_TOKENS) * CHARS_PER_TOKEN))


# ------------------------------------------------------------------ pairs


@dataclass(frozen=True)
class PairToJudge:
    """One (query, chunk) to judge: the question and the rendered chunk, with their
    token counts (each counted once, however many pairs share it)."""

    query_id: str
    question: str
    question_tokens: int
    chunk_sha: str
    chunk_text: str
    chunk_tokens: int


def iter_pairs(
    chunk_paths: Sequence[str | os.PathLike[str]],
    queries: Sequence[Mapping[str, str]],
    tokens: Tokens,
) -> Iterator[PairToJudge]:
    """Every (query, distinct chunk), chunk by chunk; token counts computed once each."""
    question_tokens = {q["id"]: tokens.count(q["question"]) for q in queries}
    for chunk in distinct_chunks(iter_sessions(chunk_paths)):
        text = chunk.text
        n = tokens.count(text)
        for q in queries:
            yield PairToJudge(q["id"], q["question"], question_tokens[q["id"]], chunk.sha, text, n)


# ------------------------------------------------------------------ judging


def _unjudged(
    pair: PairToJudge,
    reason: str,
    request_sha: str | None,
    parse_error: dict[str, str] | None = None,
    detail: str | None = None,
) -> dict[str, Any]:
    return {
        "query_id": pair.query_id,
        "chunk_sha": pair.chunk_sha,
        "reason": reason,
        "request_sha256": request_sha,
        "parse_error": parse_error,
        "detail": detail,
    }


async def judge_pair(
    client: Any,
    pair: PairToJudge,
    s: JudgeSettings,
    template: str,
    progress: Progress,
    tokens: Tokens,
) -> tuple[str, dict[str, Any]]:
    """("label", label record) or ("unjudged", side-file record) for one pair."""
    user = judge_prompt(template, pair.question, pair.chunk_text)
    counts = {
        "question": pair.question_tokens,
        "section": pair.chunk_tokens,
        "total": tokens.count(user),
    }
    try:
        check_budget(s.budget, counts, s.max_tokens)
    except BudgetError as e:
        return "unjudged", _unjudged(pair, "budget", None, detail=str(e))
    body = build_body(s.model, [{"role": "user", "content": user}], s.sampling, s.grammar)
    ex = await client.complete(body, label=f"judge {pair.query_id} {pair.chunk_sha[:12]}")
    sha = ex.request["sha256"]
    if not ex.ok:
        return "unjudged", _unjudged(pair, "request_failed", sha, detail=ex.failure())
    progress.answers += 1
    # the recording check of gates and export: the answer (fresh or from the cache)
    # must match its sha256, and its content comes from the raw bytes
    raw = check_response(client.cache.path(sha), None, Attempt.convert(ex.response))
    try:
        if raw is None:
            raise ValueError("the response has no body")
        content, finish = chat_content(raw)
    except NOT_A_CHAT_COMPLETION as e:
        error = {
            "tag": "response",
            "reason": f"not a chat completion: {e}",
            "raw": ex.response["body"][:MAX_RAW],
        }
        return "unjudged", _unjudged(pair, "unparsed", sha, error)
    try:
        judgement = parse_judge_response(content)
    except ParseError as e:
        cut = None
        if finish == "length":
            cut = (
                f"the answer was cut at max_tokens {s.max_tokens} (finish_reason length): "
                "raise labels.judge.max_tokens"
            )
        return "unjudged", _unjudged(pair, "unparsed", sha, e.to_json(), cut)
    label = {
        "query_id": pair.query_id,
        "chunk_sha": pair.chunk_sha,
        "evidence": judgement.evidence,
        "annotator": s.model,
    }
    return "label", label


async def judge_all(
    client: Any,
    pairs: Iterator[PairToJudge],
    s: JudgeSettings,
    template: str,
    progress: Progress,
    workers: int,
    tokens: Tokens,
    report_every: float = 5.0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Judge a stream of pairs with `workers` requests at most in flight; the client's
    endpoint slots cap HTTP attempts. Returns (labels, unjudged), each sorted by pair."""
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
            kind, record = await judge_pair(client, pair, s, template, progress, tokens)
            (labels if kind == "label" else unjudged).append(record)
            progress.parsed += kind == "label"
            progress.dropped += kind != "label"
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

    def key(r: dict[str, Any]) -> tuple[str, str]:
        return r["query_id"], r["chunk_sha"]

    return sorted(labels, key=key), sorted(unjudged, key=key)


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
    n_chunks = sum(
        1 for _ in distinct_chunks(iter_sessions(chunk_paths))
    )  # a first pass, for the total
    progress = Progress(n_chunks * len(queries), label, (), "pairs", "unlabelled")
    tokens = cl100k_tokens()
    pairs = iter_pairs(chunk_paths, queries, tokens)
    outputs = [out_path, unjudged_path]
    with llm_job(s.llm, s.base_url, outputs, progress, log_path, max_in_flight) as job:

        async def work(client: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            return await judge_all(client, pairs, s, template, progress, client.concurrency, tokens)

        (labels, unjudged), counters = job.run(work), progress.counters.snapshot()
    failed = [u for u in unjudged if u["reason"] == "request_failed"]
    if failed:
        down = (
            " Is the server at labels.judge.base_url (or llm.base_url) up?"
            if any("no response" in u["detail"] for u in failed)
            else ""
        )
        raise GrumemError(
            failed_requests_message(
                len(failed),
                counters["requests"],
                failed[0]["detail"],
                out_path,
                requests="judge requests",
                down=down,
            )
        )
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
