"""Stage `responses`: a job whose requests failed writes nothing and says what failed,
how, and that a rerun sends only those (the answers received are cached)."""

from __future__ import annotations

import pytest

from grumem.loop import user_message
from grumem.stages.responses import LoopSettings, _check_turn_budget, failed_requests
from grumem.template import Budget, BudgetError
from grumem.tokens import count_tokens, token_bound


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


def _settings(context: int, memory: int) -> LoopSettings:
    return LoopSettings("L1", 1, 0, "m", {"max_tokens": 8}, Budget(context, 50, memory, 50, 8), {})


def _turn(prefix: str, suffix: str) -> dict:
    return {
        "system": None,
        "prefix": prefix,
        "suffix": suffix,
        "tokens": {"question": 1, "section": 1},
    }


def test_a_turn_within_its_budget_in_tokens_but_not_in_bytes_is_sent() -> None:
    # the UTF-8 bound spares the encoder only when it fits; past it, exact counts decide
    turn, memory = _turn("a" * 60, "b" * 60), "c" * 60
    user = user_message(turn, memory)
    assert token_bound(user) > 100 and count_tokens(user) + 8 <= 100
    _check_turn_budget(_settings(100, 20), turn, user, memory)


def test_a_turn_over_its_budget_in_tokens_names_the_component() -> None:
    turn, memory = _turn("a", "b"), " ".join(f"m{i}" for i in range(30))
    with pytest.raises(BudgetError, match="over budget: memory is"):
        _check_turn_budget(_settings(1000, 20), turn, user_message(turn, memory), memory)
