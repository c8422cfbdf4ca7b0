"""Stage `responses`: a job whose requests failed writes nothing and says what failed,
how, and that a rerun sends only those (the answers received are cached)."""

from __future__ import annotations

from grumem.stages.responses import failed_requests


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
