"""grumem.core.recording: lossless response bodies and the sha checks `gates` and `export` share."""

from __future__ import annotations

import base64

import pytest

from grumem.core.json_text import sha256_bytes
from grumem.core.loop import interpret
from grumem.core.recording import check_response, recorded_content, response_bytes
from grumem.errors import RecordError
from grumem.llm.attempt import Outcome, attempt_record
from grumem.llm.cache import _attempt_validator
from grumem.records.response import Attempt

NOT_UTF8 = b'{"error": "upstream said \xff\xfe"}'


def test_a_body_that_is_not_utf8_is_recorded_losslessly() -> None:
    """A body that is not UTF-8 keeps its raw bytes as body_b64, so its sha256 (of the
    raw bytes) can be checked; a U+FFFD-decoded string could not be."""
    attempt = attempt_record(
        1, Outcome(502, NOT_UTF8, "HTTP 502"), 0.1, None, "http://127.0.0.1:9/v1"
    )
    assert attempt["sha256"] == sha256_bytes(NOT_UTF8)
    assert base64.b64decode(attempt["body_b64"]) == NOT_UTF8
    assert "\ufffd" in attempt["body"]  # still readable
    assert response_bytes(Attempt.convert(attempt)) == NOT_UTF8
    assert check_response("r.jsonl", 3, Attempt.convert(attempt)) == NOT_UTF8
    _attempt_validator().validate(attempt)  # response.schema.yaml's attempt
    # a valid UTF-8 body has no body_b64: the record is unchanged for it
    plain = attempt_record(
        1, Outcome(200, b'{"a": "\xc3\xa9"}', None), 0.1, None, "http://127.0.0.1:9/v1"
    )
    assert "body_b64" not in plain and plain["body"] == '{"a": "\u00e9"}'
    assert check_response("r.jsonl", 3, Attempt.convert(plain)) == b'{"a": "\xc3\xa9"}'


@pytest.mark.parametrize(
    "edit, field",
    [
        (
            lambda a: {
                **a,
                "body_b64": base64.b64encode(NOT_UTF8.replace(b"\xfe", b"\xfd")).decode(),
            },
            None,
        ),
        (lambda a: {**a, "body": a["body"].replace("upstream", "Upstream")}, "response.body_b64"),
        (lambda a: {**a, "body_b64": "not base64!"}, "response.body_b64"),
    ],
    ids=["raw byte", "text", "bad base64"],
)
def test_an_edited_lossless_body_fails_naming_the_line(edit, field) -> None:
    attempt = edit(
        attempt_record(1, Outcome(502, NOT_UTF8, "HTTP 502"), 0.1, None, "http://127.0.0.1:9/v1")
    )
    with pytest.raises(RecordError) as e:
        check_response("r.jsonl", 7, Attempt.convert(attempt))
    assert (e.value.path, e.value.line) == ("r.jsonl", 7)
    assert e.value.field == (field or "response.sha256")


def test_content_comes_from_the_raw_bytes() -> None:
    body = b'{"choices": [{"message": {"content": "<check>yes</check>"}, "finish_reason": "stop"}]}'
    attempt = attempt_record(1, Outcome(200, body, None), 0.1, None, "http://127.0.0.1:9/v1")
    assert recorded_content("r.jsonl", 1, Attempt.convert(attempt)) == "<check>yes</check>"
    # a 200 that is not UTF-8 is no chat completion, in the loop and in the export alike
    bad = attempt_record(1, Outcome(200, NOT_UTF8, None), 0.1, None, "http://127.0.0.1:9/v1")
    assert recorded_content("r.jsonl", 1, Attempt.convert(bad)) is None
    gate = interpret(Attempt.convert(bad))
    assert gate.parsed is False and gate.content is None
    assert gate.parse_error is not None and gate.parse_error.tag == "response"
