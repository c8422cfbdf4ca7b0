"""The exact request body (grumem.llm.request): its order and form, and a body not in
the SDK's wire form refused before it is sent.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from grumem.core.json_text import sha256_text
from grumem.errors import (
    RequestError,
    WireMismatch,
)
from grumem.llm.cache import ResponseCache
from grumem.llm.request import build_body, request_sha, sampling_params
from support.llm_client import (
    MODEL,
    REPLY,
    make_client,
    run_all,
)


def test_build_body_order_and_form():
    body = build_body(
        "m",
        [{"role": "user", "content": "é"}],
        {"top_p": 0.5, "temperature": 1e-7, "seed": 3},
        {"grammar": "g"},
    )
    assert (
        body == '{"model":"m","messages":[{"role":"user","content":"é"}],'
        '"top_p":0.5,"temperature":1e-07,"seed":3,"grammar":"g"}'
    )
    assert request_sha(body) == sha256_text(body)
    with pytest.raises(RequestError, match="seed"):
        build_body("m", [{"role": "user", "content": "x"}], {"seed": 1}, {"seed": 2})
    with pytest.raises(RequestError, match="model"):
        build_body("m", [{"role": "user", "content": "x"}], {"model": "other"})
    with pytest.raises(RequestError, match="UTF-8"):
        build_body("m", [{"role": "user", "content": "\ud800"}], {})
    llm = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512}
    assert list(sampling_params(llm, 2)) == ["temperature", "top_p", "max_tokens", "seed"]


def test_body_not_in_wire_form_is_refused_loudly(module_fake_server, tmp_path):
    server = module_fake_server.use({"model": MODEL, "default": {"content": REPLY}})
    # valid JSON, but not what the SDK writes (spaces): the record would not be the wire
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    with pytest.raises(WireMismatch, match=request_sha(body)):
        asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    assert not list(ResponseCache(tmp_path).shas())
    with pytest.raises(RequestError, match="not JSON"):
        asyncio.run(run_all(make_client(server.base_url, tmp_path), ["{nope"]))
