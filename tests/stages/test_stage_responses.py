"""Stage `responses`: a job whose requests failed writes nothing and says what failed,
how, and that a rerun sends only those (the answers received are cached)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.loop import PromptHalves, user_message
from grumem.core.template import NO_PREVIOUS_MEMORY, Budget, memory_text
from grumem.core.tokens import Encoder, Tokens, token_bound
from grumem.errors import BudgetError
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_prompt_builder
from grumem.io.tokenizer import cl100k_tokens
from grumem.records.prompt import PromptRecord, TokenCounts
from grumem.stages.prompts import plan
from grumem.stages.responses import LoopSettings, _check_turn_budget, failed_requests, turn_tokens

TOKENS = cl100k_tokens()


def exchange(status: int | None, error: str | None) -> dict:
    return {"kind": "exchange", "response": {"status": status, "error": error}}


def abort(detail: str) -> dict:
    return {"kind": "abort", "reason": "request_failed", "detail": detail}


def test_no_failed_request_is_no_message() -> None:
    records = [exchange(200, None), {"kind": "abort", "reason": "budget", "detail": "x"}]
    assert failed_requests(records, "r.jsonl") is None


def test_every_request_failing_says_so_and_asks_whether_the_server_is_up() -> None:
    records = [exchange(None, "connection error: refused"), abort("t1 ask 0: no response")]
    records += [exchange(None, "connection error: refused"), abort("t2 ask 0: no response")]
    message = failed_requests(records, "r.jsonl")
    assert message == (
        "every request failed: 2 of 2 requests failed after their retries (2 connection"
        " error); the first: t1 ask 0: no response. Is the server at llm.base_url up?"
        " Nothing written to r.jsonl; the answers received are cached, so a rerun sends"
        " only the failed requests"
    )


def test_some_requests_failing_count_each_kind() -> None:
    records = [exchange(200, None), exchange(500, "HTTP 500: boom"), abort("t2: HTTP 500")]
    records += [exchange(503, "HTTP 503"), exchange(500, "HTTP 500"), abort("t3: HTTP 500")]
    message = failed_requests(records, "out.jsonl")
    assert message is not None and not message.startswith("every")
    assert message.startswith(
        "2 of 4 requests failed after their retries (2 HTTP 500, 1 HTTP 503); the first: t2"
    )
    assert "Is the server" not in message


def _settings(context: int, memory: int, tokens: Tokens = TOKENS) -> LoopSettings:
    return LoopSettings(
        "L1", 1, 0, "m", {"max_tokens": 8}, Budget(context, 50, memory, 50, 8), {}, tokens
    )


def _refuse() -> Encoder:
    raise AssertionError("the encoder was loaded")


def _turn(prefix: str, suffix: str) -> PromptRecord:
    # as the prompts stage records it: the first turn's count less its memory's
    fixed = TOKENS.count(user_message(PromptHalves(prefix, suffix), None))
    fixed -= TOKENS.count(NO_PREVIOUS_MEMORY)
    return PromptRecord(
        trajectory_id="p/q/s/0",
        project="p",
        query_id="q",
        session="s",
        sample=0,
        t=1,
        chunk_sha="0" * 64,
        chunk_file="s.jsonl",
        chunk_line=1,
        system=None,
        prefix=prefix,
        suffix=suffix,
        tokens=TokenCounts(question=1, section=1, fixed=fixed),
    )


def test_a_turn_within_its_budget_in_tokens_but_not_in_bytes_is_sent() -> None:
    # the UTF-8 bound spares the encoder only when it fits; past it, exact counts decide
    turn, memory = _turn("a" * 60, "b" * 60), "c" * 60
    user = user_message(turn, memory)
    assert token_bound(user) > 100 and TOKENS.count(user) + 8 <= 100
    _check_turn_budget(_settings(100, 20), turn, user, memory)


def test_a_turn_within_its_budget_in_bytes_is_sent_with_no_encoder_loaded() -> None:
    """Most of a small job's start-up is the encoder's load: a turn whose UTF-8 bounds
    fit is decided on them alone."""
    turn, memory = _turn("a" * 10, "b" * 10), "c" * 10
    s = _settings(100, 20, Tokens(_refuse))
    _check_turn_budget(s, turn, user_message(turn, memory), memory)
    assert not s.tokens.loaded


def test_a_turn_over_its_budget_in_tokens_names_the_component() -> None:
    turn, memory = _turn("a", "b"), " ".join(f"m{i}" for i in range(30))
    with pytest.raises(BudgetError, match="over budget: memory is"):
        _check_turn_budget(_settings(1000, 20), turn, user_message(turn, memory), memory)


# texts that meet cl100k's pre-tokenizer at the memory slot's edges: newlines,
# spaces, punctuation, digits, letters of other scripts
_PIECES = st.sampled_from(["\n", "\n\n", " ", "  ", "\t", "'s", "a", "The", "<", ">", "1234"])
_TEXTS = st.lists(_PIECES | st.sampled_from(["é", "日本", "🙂", "-", ".\n"]) | st.text(max_size=5))
_TEXT = _TEXTS.map("".join)


@given(
    question=_TEXT.filter(str.strip),
    system=st.none() | _TEXT.filter(bool),
    sections=st.lists(_TEXT, min_size=1, max_size=3),
    memories=st.lists(st.none() | _TEXT, min_size=1, max_size=3),
)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_turn_tokens_equal_a_fresh_count_of_the_message_sent(
    tmp_path: Path, question: str, system: str | None, sections: list, memories: list
) -> None:
    """The loop's budget counts (cached, the section never encoded again)
    equal a fresh encode of the very messages the turn sends, on the prompts stage's
    own records, with any memory in the slot."""
    chunks = tmp_path / "s.jsonl"
    lines = [
        {"session": "s", "index": i, "records": [{"role": "user", "text": text}]}
        for i, text in enumerate(sections)
    ]
    chunks.write_text("".join(json.dumps(c) + "\n" for c in lines), encoding="utf-8")
    builder = load_prompt_builder(GRU_MEM_TEMPLATE, system, Budget())
    queries = [{"id": "q", "question": question}]
    for turn in plan("p", [str(chunks)], queries, builder, 1):
        for memory in memories:
            counts = turn_tokens(turn, memory, TOKENS)
            sent = TOKENS.count(user_message(turn, memory))
            assert counts["total"] == sent + (TOKENS.count(system) if system else 0)
            assert counts["memory"] == TOKENS.count(memory_text(memory))
