"""What counts as an answer (grumem.llm.answers): a 200 that is none retried and never
cached, the server's own error text, and the answering model checked; against the fake
server over real HTTP.
"""

from __future__ import annotations

import asyncio

import pytest

from grumem.llm.answers import is_answer
from grumem.llm.cache import ResponseCache
from grumem.llm.request import request_sha
from support.llm_client import (
    MODEL,
    REPLY,
    body_for,
    make_client,
    run_all,
)


def test_is_answer_takes_a_non_empty_content_only():
    assert is_answer(200, b'{"choices":[{"message":{"content":"x"}}]}') == (True, None)
    assert is_answer(200, b"<html>")[1].startswith("HTTP 200 but the body is not JSON")
    assert "choices[0].message" in is_answer(200, b'{"choices":[]}')[1]
    assert is_answer(503, b"{}") == (False, None)


@pytest.mark.parametrize("kind", ["null_content", "empty_choices", "sse"])
def test_a_200_that_is_no_answer_is_retried_and_never_cached(module_fake_server, tmp_path, kind):
    server = module_fake_server.use(
        {"model": MODEL, "default": {"content": REPLY}, "shapes": [{"kind": kind}]}
    )
    body = body_for(1)
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path, retries=2), [body]))
    assert not ex.ok and [a["status"] for a in ex.attempts] == [200, 200, 200]
    assert all(a["error"].startswith("HTTP 200 but") for a in ex.attempts)
    assert all(a["body"] for a in ex.attempts)  # what the server sent is recorded
    assert server.stats()["by_sha"] == {request_sha(body): 3}
    assert not list(ResponseCache(tmp_path).shas())
    assert is_answer(200, b'{"choices":[{"message":{"content":""}}]}')[0] is False
    refusal = b'{"choices":[{"message":{"content":null,"refusal":"I cannot"}}]}'
    assert is_answer(200, refusal) == (True, None)


def test_a_404_records_the_body_and_shows_the_servers_error_text(module_fake_server, tmp_path):
    server = module_fake_server.use(
        {"model": MODEL, "default": {"content": REPLY}, "shapes": [{"kind": "not_found"}]}
    )
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body_for(1)]))
    assert not ex.ok and len(ex.attempts) == 1 and ex.response["status"] == 404
    assert "model_not_found" in ex.response["body"]
    expected = f"HTTP 404: The model `{MODEL}` does not exist or you do not have access to it."
    assert ex.response["error"] == expected
    assert expected in ex.failure("t1")


def test_the_answering_model_is_recorded_and_a_mismatch_refused(module_fake_server, tmp_path):
    from grumem.errors import ModelMismatch

    evil = {"model": "gpt-4o-evil-substitute", "default": {"content": REPLY}}
    server = module_fake_server.use(evil)
    body = body_for(1)
    with pytest.raises(ModelMismatch) as info:
        asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    message = str(info.value)
    assert request_sha(body) in message and "'gpt-4o-evil-substitute'" in message
    assert "llm.accept_models" in message
    assert not list(ResponseCache(tmp_path).shas())  # a fixed server gets the request again
    for accept in (["gpt-4o-evil-substitute"], ["gpt-4o-*"], ["*"]):
        client = make_client(server.base_url, tmp_path / str(accept), accept_models=accept)
        (ex,) = asyncio.run(run_all(client, [body]))
        assert ex.ok and ex.response_model == "gpt-4o-evil-substitute"
    # a cached answer is checked as well: accepted before, refused once the rule is gone
    with pytest.raises(ModelMismatch):
        asyncio.run(run_all(make_client(None, tmp_path / "['*']", mode="replay"), [body]))
    server.use({"model": MODEL, "default": {"content": REPLY}})
    (ex,) = asyncio.run(run_all(make_client(server.base_url, tmp_path / "same"), [body]))
    assert ex.ok and ex.response_model == MODEL
