"""The loop's rules for one answer (grumem.core.loop): the memory budget is decided on
exact token counts."""

from __future__ import annotations

import json

import pytest

from grumem.core.loop import interpret
from grumem.core.tokens import Encoder, Tokens, token_bound
from grumem.io.tokenizer import cl100k_tokens
from grumem.records.response import Attempt

TOKENS = cl100k_tokens()


def _answer(candidate: str) -> Attempt:
    content = f"<think>t</think><check>yes</check><update>{candidate}</update><next>continue</next>"
    body = json.dumps({"choices": [{"message": {"content": content}, "finish_reason": "stop"}]})
    return Attempt(attempt=1, status=200, body=body, sha256=None, latency_s=0.1, error=None)


def test_a_candidate_longer_in_bytes_than_the_budget_but_within_it_in_tokens_is_used() -> None:
    # the UTF-8 bound (which spares loading the encoder) is only a shortcut: past it,
    # the exact count decides
    candidate = "x" * 100
    assert token_bound(candidate) > 40 >= TOKENS.count(candidate)
    gate = interpret(_answer(candidate), memory_budget=40, tokens=TOKENS)
    assert gate.parsed is True and gate.candidate == candidate


def test_a_candidate_over_the_budget_in_tokens_is_a_format_failure_naming_its_count() -> None:
    candidate = " ".join(f"fact{i}" for i in range(40))
    tokens = TOKENS.count(candidate)
    assert tokens > 40
    gate = interpret(_answer(candidate), memory_budget=40, tokens=TOKENS)
    assert gate.parsed is False and gate.update_gate is None
    assert gate.parse_error is not None and gate.parse_error.tag == "update"
    assert f"candidate memory is {tokens} tokens, over budget.memory 40" in gate.parse_error.reason


def _refuse() -> Encoder:
    raise AssertionError("the encoder was loaded")


def test_a_candidate_within_the_budget_in_bytes_loads_no_encoder() -> None:
    tokens = Tokens(_refuse)
    gate = interpret(_answer("a short fact"), memory_budget=40, tokens=tokens)
    assert gate.parsed is True and gate.candidate == "a short fact"
    assert not tokens.loaded


def test_a_memory_budget_without_a_counter_is_refused() -> None:
    with pytest.raises(TypeError, match="memory_budget needs the tokens"):
        interpret(_answer("x"), memory_budget=40)
