"""The response cache (grumem.llm.cache): a corrupt entry names its file, a cached body
that differs from its sha256 is never served (replay moves nothing, live sets it aside and
the rerun sends the request again), whatever character changes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps, sha256_bytes
from grumem.core.recording import stored_body
from grumem.errors import (
    CacheError,
    CorruptEntry,
)
from grumem.llm.cache import ResponseCache
from grumem.llm.request import request_sha
from support.llm_client import (
    MODEL,
    REPLY,
    body_for,
    make_client,
    run_all,
)
from support.replies import completion_body


def test_corrupt_cache_entry_names_the_file(tmp_path):
    cache = ResponseCache(tmp_path)
    sha = request_sha("x")
    path = cache.path(sha)
    path.parent.mkdir(parents=True)
    path.write_text('{"request_sha256": "', encoding="utf-8")
    with pytest.raises(CacheError, match=str(path)):
        cache.get(sha)
    path.write_text(dumps({"request_sha256": sha, "attempts": [{"attempt": 1}]}), "utf-8")
    with pytest.raises(CacheError, match="attempts.0"):
        cache.get(sha)


def _entry_with_body(path: Path, edit) -> bytes:
    """Rewrite the last attempt's body of the cache entry at `path` with `edit`,
    leaving its recorded sha256 as it was; returns the new bytes of the file."""
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["attempts"][-1]["body"] = edit(entry["attempts"][-1]["body"])
    data = dumps(entry).encode("utf-8")
    path.write_bytes(data)
    return data


def test_a_cached_body_that_differs_from_its_sha_is_never_served(module_fake_server, tmp_path):
    """Replay fails naming the file and the request, and moves nothing; live fails too,
    having set the entry aside, and its rerun sends that one request again."""
    server = module_fake_server.use({"model": MODEL, "default": {"content": REPLY}})
    body = body_for(7)
    sha = request_sha(body)
    [first] = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    path = ResponseCache(tmp_path).path(sha)
    good = path.read_bytes()
    bad = _entry_with_body(path, lambda b: b.replace("<check>no", "<check>yes", 1))

    with pytest.raises(CorruptEntry) as info:
        asyncio.run(run_all(make_client(None, tmp_path, mode="replay"), [body]))
    message = str(info.value)
    assert str(path) in message and f"request {sha} (b0) is corrupt" in message
    assert "attempts.0.sha256" in message and "restore the entry" in message
    assert "\n" not in message and path.read_bytes() == bad  # replay moves nothing

    server.reset()
    with pytest.raises(CorruptEntry, match="Rerun to send this request again") as info:
        asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    aside = path.with_name(path.name + ".corrupt")
    assert info.value.moved_to == aside and str(aside) in str(info.value)
    assert aside.read_bytes() == bad and not path.exists()
    assert sha not in set(ResponseCache(tmp_path).shas())
    assert server.stats()["requests"] == 0  # failing, the job sent nothing

    [again] = asyncio.run(run_all(make_client(server.base_url, tmp_path), [body]))
    assert server.stats()["requests"] == 1 and not again.from_cache
    assert again.response["body"] == first.response["body"]
    entry = json.loads(path.read_text(encoding="utf-8"))
    assert entry["attempts"][-1]["body"] == json.loads(good)["attempts"][-1]["body"]
    assert aside.read_bytes() == bad  # kept for a person to look at


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_change_to_a_cached_body_is_found(tmp_path, data):
    """Whatever character of whichever attempt's body changes, the entry is not served."""
    ok = completion_body(request_sha("x"), MODEL, REPLY, 10, 20, "stop")
    failed = b'{"error": {"message": "overloaded"}}'
    attempts = [
        {"attempt": 1, "status": 503, **stored_body(failed), "sha256": sha256_bytes(failed),
         "latency_s": 0.1, "error": "HTTP 503: overloaded"},
        {"attempt": 2, "status": 200, **stored_body(ok), "sha256": sha256_bytes(ok),
         "latency_s": 0.2, "error": None},
    ]  # fmt: skip
    cache = ResponseCache(tmp_path / "c")
    sha = request_sha(f"x{data.draw(st.integers(0, 10**9))}")
    cache.put(sha, attempts)
    assert cache.get(sha) == attempts
    i = data.draw(st.integers(0, 1), label="attempt")
    text = attempts[i]["body"]
    at = data.draw(st.integers(0, len(text) - 1), label="at")
    new = data.draw(st.characters(codec="utf-8").filter(lambda c: c != text[at]), label="new")
    entry = {"request_sha256": sha, "attempts": [dict(a) for a in attempts]}
    entry["attempts"][i]["body"] = text[:at] + new + text[at + 1 :]
    cache.path(sha).write_text(dumps(entry), encoding="utf-8")
    with pytest.raises(CorruptEntry, match=f"attempts.{i}.sha256"):
        cache.get(sha)
    with pytest.raises(CorruptEntry):
        cache.get(sha, set_aside=True)
    assert sha not in cache and cache.path(sha).with_suffix(".json.corrupt").is_file()
