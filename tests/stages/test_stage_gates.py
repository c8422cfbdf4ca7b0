"""Stage `gates`: the strict offline re-parse checks every recorded body through the
shared recording checks (grumem.core.recording)."""

from __future__ import annotations

import base64

import pytest

from grumem.errors import RecordError
from grumem.io.template_files import load_prompt_builder
from grumem.llm.attempt import Outcome, attempt_record

NOT_UTF8 = b'{"error": "upstream said \xff\xfe"}'


def _one_turn_recording(tmp_path, response: dict) -> tuple:
    """A prompts file of one turn and a responses file whose one exchange got
    `response` (then an abort, as the loop records a failed request)."""
    import json

    from grumem.core.json_text import dumps, sha256_text
    from grumem.core.template import memory_text
    from grumem.io.jsonl import write_jsonl
    from grumem.io.typed import write_records
    from grumem.records.prompt import PromptRecord
    from grumem.stages.prompts import plan

    chunks = tmp_path / "s.jsonl"
    chunks.write_text(
        json.dumps({"session": "s", "index": 0, "records": [{"role": "user", "text": "hi"}]})
        + "\n",
        encoding="utf-8",
    )
    [p] = plan("p", [str(chunks)], [{"id": "q", "question": "What?"}], load_prompt_builder(), 1)
    prompts = tmp_path / "prompts.jsonl"
    write_records(prompts, [p], PromptRecord)
    user = p.prefix + memory_text(None) + p.suffix
    body = dumps({"model": "m", "messages": [{"role": "user", "content": user}]})
    base = {"trajectory_id": p.trajectory_id, "t": 1, "chunk_sha": p.chunk_sha}
    exchange = {
        "kind": "exchange",
        **base,
        "ask": 0,
        "memory_before": None,
        "request": {"body": body, "sha256": sha256_text(body)},
        "response": response,
        "attempts": [response],
    }
    abort = {"kind": "abort", **base, "reason": "request_failed", "component": None}
    responses = tmp_path / "responses.jsonl"
    write_jsonl(responses, [exchange, {**abort, "detail": "HTTP 502"}], "response")
    return prompts, responses


def _edit_b64(attempt: dict) -> dict:
    raw = base64.b64decode(attempt["body_b64"]).replace(b"\xfe", b"\xfd")
    return {**attempt, "body_b64": base64.b64encode(raw).decode()}


@pytest.mark.parametrize(
    "raw, edit",
    [
        (
            b'{"error": {"message": "bad gateway"}}',
            lambda a: {**a, "body": a["body"].replace("bad", "sad")},
        ),
        (NOT_UTF8, _edit_b64),
    ],
    ids=["utf-8 error body", "body not utf-8"],
)
def test_gates_check_every_recorded_body_through_the_same_function(tmp_path, raw, edit) -> None:
    """The `gates` stage checks the sha256 of every recorded body, an error body and a
    body that is not UTF-8 (kept as body_b64) too: an edited one fails naming file,
    line and field."""
    from grumem.stages.gates import regate

    attempt = attempt_record(1, Outcome(502, raw, "HTTP 502"), 0.1, None, "http://127.0.0.1:9/v1")
    prompts, responses = _one_turn_recording(tmp_path, attempt)
    [gate] = list(regate(prompts, responses))
    assert gate.parsed is False and gate.parse_error is not None
    assert gate.parse_error.tag == "response"

    prompts, responses = _one_turn_recording(tmp_path, edit(attempt))
    with pytest.raises(RecordError) as e:
        list(regate(prompts, responses))
    assert (e.value.path, e.value.line, e.value.field) == (str(responses), 1, "response.sha256")
