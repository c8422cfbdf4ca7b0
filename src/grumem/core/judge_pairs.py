"""The (query, chunk) pairs an LLM judge labels: each pair's prompt and budget, and what
its answer makes of it, a label or an unjudged record. Pure: the judge stage reads the
chunks and writes the records, grumem.llm.judge_requests sends the prompts.

The judge sees the question and the chunk rendered exactly as the memory agent
sees it (grumem.core.chunk_text), through templates/judge.txt, and answers
`<think>…</think><evidence>yes|no</evidence>`. A pair whose prompt does not
fit the budget, or whose answer does not parse strictly, gets no label: it
gets an unjudged record saying why, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grumem.core.chunk_text import Chunk
from grumem.core.gate_parser import MAX_RAW
from grumem.core.judge_parser import parse_judge_response
from grumem.core.recording import NOT_A_CHAT_COMPLETION, chat_content
from grumem.core.template import Budget, check_budget, fill
from grumem.core.tokens import Tokens
from grumem.errors import BudgetError, ParseError

JUDGE_SLOTS = ("prompt", "chunk")


def judge_prompt(template: str, question: str, chunk_text: str) -> str:
    """The judge's user message, slots filled in one pass (grumem.core.template.fill): a question
    holding `{chunk}` or a chunk holding `{prompt}` stays literal."""
    return fill(template, {"prompt": question, "chunk": chunk_text})


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

    def budget_problem(self, budget: Budget, prompt_tokens: int, max_tokens: int) -> str | None:
        """Why the prompt of `prompt_tokens` and an answer of `max_tokens` do not fit
        `budget` (None: they fit)."""
        counts = {
            "question": self.question_tokens,
            "section": self.chunk_tokens,
            "total": prompt_tokens,
        }
        try:
            check_budget(budget, counts, max_tokens)
        except BudgetError as e:
            return str(e)
        return None


def judge_pairs(
    chunks: Iterable[Chunk], queries: Sequence[Mapping[str, str]], tokens: Tokens
) -> Iterator[PairToJudge]:
    """Every (query, chunk), chunk by chunk; token counts computed once each. `chunks`
    are distinct (grumem.core.chunk_text.distinct_chunks): one pair per sha and query."""
    question_tokens = {q["id"]: tokens.count(q["question"]) for q in queries}
    for chunk in chunks:
        text = chunk.text
        n = tokens.count(text)
        for q in queries:
            yield PairToJudge(q["id"], q["question"], question_tokens[q["id"]], chunk.sha, text, n)


@dataclass(frozen=True)
class Judged:
    """What one pair came to: a label record, or an unjudged record saying why not."""

    record: dict[str, Any]
    labelled: bool


def unjudged(
    pair: PairToJudge,
    reason: str,
    request_sha: str | None,
    parse_error: dict[str, str] | None = None,
    detail: str | None = None,
) -> Judged:
    """A pair left without a label: `reason` is `budget`, `request_failed` or `unparsed`."""
    record = {
        "query_id": pair.query_id,
        "chunk_sha": pair.chunk_sha,
        "reason": reason,
        "request_sha256": request_sha,
        "parse_error": parse_error,
        "detail": detail,
    }
    return Judged(record, labelled=False)


def judge_answer(
    pair: PairToJudge,
    request_sha: str,
    raw: bytes | None,
    body: str,
    max_tokens: int,
    annotator: str,
) -> Judged:
    """The label of `pair` from its answer, strictly parsed, or why it has none.

    `raw` is the answer's body, checked against its sha256 (None: it has none);
    `body` its text as recorded, shown truncated when it is no chat completion."""
    try:
        if raw is None:
            raise ValueError("the response has no body")
        content, finish = chat_content(raw)
    except NOT_A_CHAT_COMPLETION as e:
        error = {"tag": "response", "reason": f"not a chat completion: {e}", "raw": body[:MAX_RAW]}
        return unjudged(pair, "unparsed", request_sha, error)
    try:
        judgement = parse_judge_response(content)
    except ParseError as e:
        cut = None
        if finish == "length":
            cut = (
                f"the answer was cut at max_tokens {max_tokens} (finish_reason length): "
                "raise labels.judge.max_tokens"
            )
        return unjudged(pair, "unparsed", request_sha, e.to_json(), cut)
    label = {
        "query_id": pair.query_id,
        "chunk_sha": pair.chunk_sha,
        "evidence": judgement.evidence,
        "annotator": annotator,
    }
    return Judged(label, labelled=True)


def by_pair(records: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Label or unjudged records sorted by (query_id, chunk_sha): the files' order."""
    return sorted(records, key=lambda r: (r["query_id"], r["chunk_sha"]))
