"""The judge's pairs: the prompt's golden file, one-pass filling, one pair per (query,
distinct chunk), the budget, and what an answer makes of a pair (a label, or an
unjudged record saying why: never a guessed label)."""

from __future__ import annotations

import json

import pytest

from grumem.config.settings import load_queries
from grumem.core.chunk_text import distinct_chunks
from grumem.core.json_text import sha256_text
from grumem.core.judge_pairs import (
    PairToJudge,
    by_pair,
    judge_answer,
    judge_pairs,
    judge_prompt,
    unjudged,
)
from grumem.core.template import Budget
from grumem.io.chunk_files import iter_sessions, read_chunk_file
from grumem.io.template_files import load_judge_template
from grumem.io.tokenizer import cl100k_tokens
from support.checkout import FIXTURES_DIR

DEMO = FIXTURES_DIR / "demo"
QUERIES = DEMO / "queries.yaml"
GOLDEN = FIXTURES_DIR / "expected" / "judge-prompt.txt"
PAIR = PairToJudge("q1", "what broke?", 3, "ab" * 32, "[User] it broke", 4)


def test_judge_prompt_golden():
    """The rendered judge prompt for (errors-and-fixes, demo-01 chunk 1), byte for byte;
    the chunk inside it is exactly what the memory agent sees (its sha is the chunk_sha)."""
    question = load_queries(QUERIES)[0]["question"]
    chunk = read_chunk_file(DEMO / "chunks" / "demo-01-k8s-namespace.jsonl")[1]
    got = judge_prompt(load_judge_template(), question, chunk.text)
    assert got.encode("utf-8") == GOLDEN.read_bytes()
    inside = got.split("<chunk> ", 1)[1].rsplit(" </chunk>", 1)[0]
    assert sha256_text(inside) == chunk.sha
    assert "<evidence>" in got and "<think>" in got


def test_single_pass_fill():
    # a question holding {chunk} and a chunk holding {prompt} stay literal
    got = judge_prompt(load_judge_template(), "what is {chunk}?", "[User] print('{prompt}')")
    assert "<question> what is {chunk}? </question>" in got
    assert "<chunk> [User] print('{prompt}') </chunk>" in got


def test_one_pair_per_query_and_distinct_chunk_counted_once_each():
    queries = load_queries(QUERIES)
    chunks = list(distinct_chunks(iter_sessions([DEMO / "chunks"])))
    tokens = cl100k_tokens()
    pairs = list(judge_pairs(chunks, queries, tokens))
    assert len(pairs) == len(chunks) * len(queries)
    assert len({(p.query_id, p.chunk_sha) for p in pairs}) == len(pairs)
    first = pairs[0]
    assert (first.query_id, first.chunk_sha) == (queries[0]["id"], chunks[0].sha)
    assert first.chunk_text == chunks[0].text
    assert first.chunk_tokens == tokens.count(chunks[0].text)
    assert first.question_tokens == tokens.count(queries[0]["question"])


def test_the_budget_names_the_component_that_does_not_fit():
    assert PAIR.budget_problem(Budget(), 50, 256) is None
    assert PAIR.budget_problem(Budget(section=3), 50, 256) == (
        "over budget: section is 4 tokens, limit 3"
    )
    why = PAIR.budget_problem(Budget(context=300), 50, 256)
    assert why is not None and "prompt 50 + response 256 > context 300" in why


def chat(content: str, finish: str = "stop") -> bytes:
    choice = {"message": {"role": "assistant", "content": content}, "finish_reason": finish}
    return json.dumps({"choices": [choice]}).encode()


def test_an_answer_that_parses_is_a_label_of_the_judges_model():
    raw = chat("<think>the error is named</think>\n<evidence>yes</evidence>")
    judged = judge_answer(PAIR, "r" * 64, raw, raw.decode(), 256, "judge-model")
    assert judged.labelled
    assert judged.record == {
        "query_id": "q1",
        "chunk_sha": PAIR.chunk_sha,
        "evidence": True,
        "annotator": "judge-model",
    }


def test_an_answer_that_does_not_parse_is_unjudged_with_the_parse_error():
    raw = chat("<evidence>Yes</evidence>")
    judged = judge_answer(PAIR, "r" * 64, raw, raw.decode(), 256, "m")
    assert not judged.labelled
    record = judged.record
    assert (record["reason"], record["request_sha256"], record["detail"]) == (
        "unparsed",
        "r" * 64,
        None,
    )
    assert record["parse_error"]["tag"] == "evidence"
    # cut by max_tokens: the record says what to raise
    raw = chat("<think>and then and then", finish="length")
    judged = judge_answer(PAIR, "r" * 64, raw, raw.decode(), 64, "m")
    assert judged.record["parse_error"]["tag"] == "think"
    assert judged.record["detail"] == (
        "the answer was cut at max_tokens 64 (finish_reason length): raise labels.judge.max_tokens"
    )


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (None, "not a chat completion: the response has no body"),
        (b'{"choices": []}', "not a chat completion: list index out of range"),
        (b"\xff not utf-8", "not a chat completion"),
    ],
)
def test_a_body_that_is_no_chat_completion_is_unjudged(raw, why):
    body = "x" * 5000
    judged = judge_answer(PAIR, "r" * 64, raw, body, 256, "m")
    assert not judged.labelled and judged.record["reason"] == "unparsed"
    error = judged.record["parse_error"]
    assert error["tag"] == "response" and error["reason"].startswith(why)
    assert body.startswith(error["raw"]) and len(error["raw"]) < len(body)


def test_records_are_sorted_by_pair():
    b = unjudged(PairToJudge("q2", "", 0, "aa", "", 0), "budget", None).record
    a = unjudged(PairToJudge("q1", "", 0, "bb", "", 0), "budget", None).record
    c = unjudged(PairToJudge("q1", "", 0, "aa", "", 0), "budget", None).record
    assert by_pair([b, a, c]) == [c, a, b]
