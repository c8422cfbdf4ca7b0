"""The API key (grumem.llm.secrets): refused with a control character and never shown,
scrubbed in every spelling, a response echoing it neither cached nor recorded, and in no
file and no error of a run with faults; against the fake server over real HTTP.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from grumem.core.json_text import dumps, sha256_text
from grumem.errors import (
    GrumemError,
    ReplayMiss,
)
from grumem.llm.cache import ResponseCache
from grumem.llm.local_server import free_port
from grumem.llm.request import request_sha
from grumem.llm.secrets import NO_KEY, ApiKey
from support.llm_client import (
    FAULTS,
    KEY_ENV,
    MODEL,
    REPLY,
    body_for,
    make_client,
    run_all,
)

SECRET = "sk-grumem-SECRET-4b8e2d6f1a"


def key_forms(key: str) -> list[str]:
    """Every spelling of `key` a leak could take (checked independently of the client's)."""
    from urllib.parse import quote

    raw = key.encode()
    return [key, key.strip(), repr(key)[1:-1], repr(raw)[2:-1], json.dumps(key)[1:-1], quote(key)]


@pytest.mark.parametrize("bad", ["\n", "\r\n", "\t", "\x1b", " ", "\x7f"])
def test_key_with_a_control_character_is_refused_without_showing_it(tmp_path, monkeypatch, bad):
    monkeypatch.setenv(KEY_ENV, SECRET + bad)
    with pytest.raises(GrumemError) as info:
        make_client("http://127.0.0.1:9/v1", tmp_path)
    message = str(info.value)
    assert KEY_ENV in message and "is not shown" in message
    assert "grumem-SECRET" not in message and "sk-" not in message


def test_api_key_env_must_be_a_variable_name_and_is_not_echoed(tmp_path):
    from grumem.config.settings import validate_config

    with pytest.raises(GrumemError) as info:
        make_client("http://127.0.0.1:9/v1", tmp_path, api_key_env=SECRET)
    assert "NAME of an environment variable" in str(info.value)
    assert "grumem-SECRET" not in str(info.value)
    config = {"projects": {"p": {"chunks": "c", "queries": "q"}}, "llm": {"api_key_env": SECRET}}
    with pytest.raises(GrumemError) as info:
        validate_config(config, "my.yaml")
    assert "llm.api_key_env" in str(info.value) and "grumem-SECRET" not in str(info.value)
    ok = {"projects": {"p": {"chunks": "c", "queries": "q"}}, "llm": {"api_key_env": "MY_KEY_2"}}
    assert validate_config(ok)["llm"]["api_key_env"] == "MY_KEY_2"


def test_scrub_removes_every_representation_of_the_key():
    from urllib.parse import quote

    from grumem.llm.secrets import scrub, secret_forms

    key = SECRET + "\n"
    texts = [
        f"Illegal header value b'Bearer {SECRET}\\n'",  # the h11 error, as a bytes repr
        f"header {key!r}",
        f"json {json.dumps({'k': key})}",
        "url https://h/v1?key=" + quote(key, safe=""),
        f"raw {key} and stripped {SECRET}.",
    ]
    for text in texts:
        out = scrub(text, secret_forms(key))
        assert "[api key]" in out, (text, out)
        assert "SECRET" not in out, (text, out)


def test_a_response_echoing_the_key_is_neither_cached_nor_recorded(
    module_fake_server, tmp_path, monkeypatch
):
    from grumem.errors import KeyInResponse

    monkeypatch.setenv(KEY_ENV, SECRET)
    server = module_fake_server.use(
        {
            "model": MODEL,
            "default": {"content": REPLY},
            "shapes": [{"kind": "echo_authorization", "match": "echo"}],
        }
    )
    cache = tmp_path / "cache"
    ok = asyncio.run(run_all(make_client(server.base_url, cache), [body_for(1)]))
    assert ok[0].ok
    body = body_for(2, "echo")
    with pytest.raises(KeyInResponse) as info:
        asyncio.run(run_all(make_client(server.base_url, cache), [body]))
    message = str(info.value)
    assert request_sha(body) in message and "b2" in message and KEY_ENV in message
    assert not any(form in message for form in key_forms(SECRET))
    assert request_sha(body) not in set(ResponseCache(cache).shas())
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p
    # an entry written before this check (by hand here) is refused on a cache hit too
    sha = request_sha(body)
    echoed = dict(ok[0].attempts[-1], body=ok[0].attempts[-1]["body"] + SECRET)
    echoed["sha256"] = sha256_text(echoed["body"])
    ResponseCache(cache).put(sha, [echoed])
    with pytest.raises(KeyInResponse, match=sha):
        asyncio.run(run_all(make_client(None, cache, mode="replay"), [body]))


def test_api_key_is_in_no_file_and_no_error(module_fake_server, tmp_path, monkeypatch):
    key = "sk-grumem-SECRET-7f3a9c1e5d"
    monkeypatch.setenv(KEY_ENV, key)  # the process environment, not the SDK
    log_path = tmp_path / "debug.log"
    handler = logging.FileHandler(log_path, encoding="utf-8")
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # the SDK's and httpx2's debug logs go to a file too
    try:
        server = module_fake_server.use(
            {
                "model": MODEL,
                "default": {"content": REPLY},
                "faults": {**FAULTS, "kinds": ["429", "reset", "non_json"]},
            }
        )
        cache = tmp_path / "cache"
        good = asyncio.run(
            run_all(
                make_client(server.base_url, cache, retries=6), [body_for(i) for i in range(20)]
            )
        )
        server.use({"model": MODEL, "outage": True})
        bad = asyncio.run(
            run_all(
                make_client(server.base_url, cache, retries=1),
                [body_for(i, "fail") for i in range(3)],
            )
        )
        down = asyncio.run(
            run_all(
                make_client(f"http://127.0.0.1:{free_port()}/v1", cache, retries=0),
                [body_for(1, "down")],
            )
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    assert all(ex.ok for ex in good) and not any(ex.ok for ex in bad + down)
    texts = [ex.failure() for ex in bad + down] + [dumps(ex.attempts) for ex in good + bad + down]
    try:
        asyncio.run(make_client(None, cache, mode="replay").complete(body_for(5, "miss")))
    except ReplayMiss as e:
        texts.append(str(e))
    assert not any(key in t for t in texts)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in written) and log_path.stat().st_size > 0
    for p in written:
        assert key.encode() not in p.read_bytes(), p


def test_the_key_is_not_in_the_clients_repr_nor_in_its_key_holders(tmp_path, monkeypatch):
    """A traceback's locals, a debugger or a log line show the client and its ApiKey
    by repr: the variable's name is there, the key in no form."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    client = make_client(None, tmp_path, mode="replay")
    assert KEY_ENV in repr(client.key)
    for text in (repr(client), repr(client.key), str(client.key)):
        assert not any(form in text for form in key_forms(SECRET)), text
    assert client.key.scrub(f"Bearer {SECRET}") == "Bearer [api key]"
    assert client.key.echoed_in(f'{{"auth": "Bearer {SECRET}"}}'.encode())
    monkeypatch.delenv(KEY_ENV)
    unset = ApiKey.from_env(KEY_ENV)
    assert (unset.value, unset.forms) == (NO_KEY, ())
    assert not unset.echoed_in(NO_KEY) and unset.scrub(NO_KEY) == NO_KEY
