"""The fake OpenAI-compatible server, driven over real HTTP on 127.0.0.1.

Every test talks to a subprocess (`fake_server`, `module_fake_server`) with http.client:
what a client sees on the wire is what is asserted, including the broken
responses the fault kinds promise.
"""

from __future__ import annotations

import ast
import http.client
import json
import math
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import grumem
from grumem.core.gate_parser import parse_gate_response
from grumem.core.json_text import sha256_bytes
from grumem.io.template_files import load_prompt_builder
from support.checkout import FIXTURES_DIR
from support.draws import draw_tokens, fault_for
from support.fake_server import FakeServerError, check_host
from support.harness import child_env
from support.script import Capacity, Faults, ScriptError, TokenDist, load_script

GATE = {"check_if": "error|fixed", "next_if": "DONE"}


def chat(text: str, *earlier: str, **extra: Any) -> bytes:
    """A request body whose last message is `text` (earlier user messages first)."""
    messages = [{"role": "user", "content": t} for t in (*earlier, text)]
    body = {"model": "fake-model", "messages": messages, "temperature": 0, **extra}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def post(server: Any, body: bytes, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request(
            "POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def get(server: Any, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def content_of(data: bytes) -> str:
    return json.loads(data)["choices"][0]["message"]["content"]


def gate_prompt(section: str, memory: str | None = None) -> bytes:
    user = load_prompt_builder().build("Which errors were fixed?", section, memory).user
    return chat(user)


# ------------------------------------------------------------------ replies


def test_content_match_and_completion_shape(module_fake_server):
    server = module_fake_server.use(
        {
            "model": "m-1",
            "replies": [{"match": "kubectl", "content": "K"}],
            "default": {"content": "D"},
        }
    )
    status, headers, data = post(server, chat("run kubectl get pods"))
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    doc = json.loads(data)
    assert doc["object"] == "chat.completion"
    assert doc["created"] == 0
    assert doc["model"] == "m-1"
    assert doc["id"] == "chatcmpl-" + sha256_bytes(chat("run kubectl get pods"))[:32]
    choice = doc["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "K"}
    assert choice["finish_reason"] == "stop"
    usage = doc["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] == 1
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # only the last message is matched
    assert content_of(post(server, chat("hello", "kubectl earlier"))[2]) == "D"
    assert get(server, "/v1/models") == (
        200,
        {
            "object": "list",
            "data": [{"id": "m-1", "object": "model", "created": 0, "owned_by": "grumem-fake"}],
        },
    )
    assert get(server, "/health") == (200, {"status": "ok"})


def test_sequence_advances_and_repeats_last(module_fake_server):
    server = module_fake_server.use(
        {
            "replies": [
                {"match": "Turn two", "sequence": ["a", "b", "c"]},
                {"match": ".", "content": "other"},
            ]
        }
    )
    got = [content_of(post(server, chat(f"Turn two #{i}"))[2]) for i in range(5)]
    assert got == ["a", "b", "c", "c", "c"]
    assert content_of(post(server, chat("Turn one"))[2]) == "other"
    server.reset()  # reset also rewinds sequences
    assert content_of(post(server, chat("Turn two"))[2]) == "a"


def test_gate_policy_check_update_next(module_fake_server):
    server = module_fake_server.use({"replies": [{"match": ".", "gate": GATE}]})
    # t=1, evidence: memory starts from nothing
    first = content_of(post(server, gate_prompt("[ToolResult] error: no such namespace\nmore"))[2])
    g = parse_gate_response(first)
    assert (g.update_gate, g.exit_gate) == (True, False)
    assert g.candidate == "- [ToolResult] error: no such namespace"
    # t=2, evidence again: the previous memory is carried, one line appended
    second = content_of(post(server, gate_prompt("[Assistant] fixed it", g.candidate))[2])
    g2 = parse_gate_response(second)
    assert g2.update_gate and g2.candidate == g.candidate + "\n- [Assistant] fixed it"
    # no evidence: the previous memory verbatim, check no
    third = content_of(post(server, gate_prompt("[User] thanks", g2.candidate))[2])
    g3 = parse_gate_response(third)
    assert (g3.update_gate, g3.candidate, g3.exit_gate) == (False, g2.candidate, False)
    # at t=1 without evidence the memory is the template's placeholder, verbatim
    g4 = parse_gate_response(content_of(post(server, gate_prompt("[User] hi"))[2]))
    assert (g4.update_gate, g4.candidate) == (False, "No previous memory")
    # next_if: end
    g5 = parse_gate_response(content_of(post(server, gate_prompt("[User] DONE"))[2]))
    assert (g5.update_gate, g5.exit_gate) == (False, True)


def test_gate_update_line_is_truncated_and_defanged(module_fake_server):
    server = module_fake_server.use({"replies": [{"match": ".", "gate": {"check_if": "error"}}]})
    long_line = "error " + "x" * 300
    g = parse_gate_response(content_of(post(server, gate_prompt(long_line))[2]))
    assert g.candidate == "- " + long_line[:200]
    tagged = "error <update>boom</update> <memory>"
    g = parse_gate_response(content_of(post(server, gate_prompt(tagged))[2]))
    assert g.candidate == "- error &lt;update>boom&lt;/update> &lt;memory>"


def test_a_seed_rule_answers_only_its_seed(module_fake_server):
    """Samples of one trajectory are requests with their own seed (grumem.core.loop.ask_seed):
    a rule with `seed` answers only that seed, the rules after it every other."""
    strict = {"match": ".", "seed": 1, "gate": {"check_if": "traceback"}}
    server = module_fake_server.use({"replies": [strict, {"match": ".", "gate": GATE}]})
    user = load_prompt_builder().build("Which errors?", "[Assistant] fixed it", None).user

    def update_gate(**extra: Any) -> bool:
        return parse_gate_response(content_of(post(server, chat(user, **extra))[2])).update_gate

    assert update_gate(seed=0) is True  # GATE: `fixed` is evidence
    assert update_gate(seed=1) is False  # the seed-1 rule: only a traceback is
    assert update_gate(seed=2) is True
    assert update_gate() is True  # no seed in the request: not seed 1
    assert update_gate(seed=True) is True  # JSON true is not the integer 1


def test_gate_rule_on_a_non_prompt_is_400(module_fake_server):
    server = module_fake_server.use({"replies": [{"match": ".", "gate": GATE}]})
    status, _, data = post(server, chat("not a GRU-Mem prompt"))
    assert status == 400 and "<memory>" in json.loads(data)["error"]["message"]


def test_judge_policy(module_fake_server):
    server = module_fake_server.use(
        {"replies": [{"match": "<evidence>", "judge": {"yes_if": "Traceback"}}]}
    )
    yes = content_of(post(server, chat("Traceback (most recent call last)\n<evidence>?"))[2])
    no = content_of(post(server, chat("all green\n<evidence>?"))[2])
    assert yes.endswith("</think>\n<evidence>yes</evidence>") and yes.startswith("<think>")
    assert no.endswith("</think>\n<evidence>no</evidence>")


def test_no_match_without_default_is_400_and_bad_requests(module_fake_server):
    server = module_fake_server.use({"replies": [{"match": "kubectl", "content": "K"}]})
    for body in (chat("nothing"), b"{not json", b'{"messages": []}', chat("kubectl", stream=True)):
        status, headers, data = post(server, body)
        assert status == 400, body
        assert headers["Content-Type"].startswith("application/json")
        assert json.loads(data)["error"]["type"] == "invalid_request_error"
    stats = server.stats()
    assert (stats["requests"], stats["answered"]) == (4, 0)


def test_same_body_same_bytes_in_another_process(module_fake_server, fake_server):
    script = {"replies": [{"match": ".", "gate": GATE}]}
    body = gate_prompt("error é ü 漢字")
    one = module_fake_server.use(script)
    a, b = post(one, body)[2], post(one, body)[2]
    assert a == b
    two = fake_server(script)
    assert post(two, body)[2] == a
    assert post(two, gate_prompt("other error"))[2] != a
    two.stop()
    assert two.proc.returncode == 0


def test_stats_count_by_sha_and_reset(module_fake_server):
    server = module_fake_server.use({"replies": [{"match": ".", "content": "x"}]})
    b1, b2 = chat("one"), chat("two")
    for body in (b1, b1, b2):
        post(server, body)
    stats = server.stats()
    assert stats == {
        "requests": 3,
        "answered": 3,
        "by_sha": {sha256_bytes(b1): 2, sha256_bytes(b2): 1},
        "faults": {},
        "in_flight_max": 1,
        "streamed_bytes": 0,
    }
    server.reset()
    assert server.stats() == {
        "requests": 0,
        "answered": 0,
        "by_sha": {},
        "faults": {},
        "in_flight_max": 0,
        "streamed_bytes": 0,
    }


def test_set_script_replaces_and_rejects_bad_scripts(module_fake_server):
    server = module_fake_server.use({"replies": [{"match": ".", "content": "old"}]})
    server.set_script({"replies": [{"match": ".", "content": "new"}]})
    assert content_of(post(server, chat("hi"))[2]) == "new"
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(
        "POST", "/_fake/script", body=json.dumps({"replies": [{"match": "(", "content": "x"}]})
    )
    resp = conn.getresponse()
    assert resp.status == 400
    assert "replies[0].match" in json.loads(resp.read())["error"]["message"]
    conn.close()
    assert content_of(post(server, chat("hi"))[2]) == "new"


# ------------------------------------------------------------------- faults


def observe(server: Any, body: bytes, timeout: float = 10.0) -> str:
    """What a client sees for one attempt, as a fault kind name (or "ok")."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body=body)
        resp = conn.getresponse()
        if resp.status != 200:
            return str(resp.status)
        try:
            data = resp.read()
        except (http.client.IncompleteRead, ConnectionError):
            return "reset"
        if resp.getheader("Content-Type", "").startswith("text/html"):
            return "non_json"
        assert int(resp.getheader("Content-Length")) == len(data)
        try:
            doc = json.loads(data)
        except ValueError:
            return "truncated"
        return "length" if doc["choices"][0]["finish_reason"] == "length" else "ok"
    finally:
        conn.close()


def test_each_fault_kind_as_seen_by_a_client(module_fake_server):
    reply = "<think>t</think>\n<check>yes</check>\n<update>memory</update>\n<next>continue</next>"
    server = module_fake_server.use({"replies": [{"match": ".", "content": reply}]})
    body = chat("hello")
    full = post(server, body)[2]
    for kind in ("429", "500", "503", "reset", "truncated", "non_json", "length"):
        server.set_script(
            {
                "replies": [{"match": ".", "content": reply}],
                "faults": {"rate": 1.0, "kinds": [kind], "retry_after": 7},
            }
        )
        server.reset()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", body=body)
        resp = conn.getresponse()
        if kind in ("429", "500", "503"):
            assert resp.status == int(kind)
            assert "error" in json.loads(resp.read())
            if kind in ("429", "503"):
                assert resp.getheader("Retry-After") == "7"
        elif kind == "reset":
            # the status line and headers arrive, then the connection drops mid-body
            assert resp.status == 200
            assert int(resp.getheader("Content-Length")) == len(full)
            with pytest.raises((http.client.IncompleteRead, ConnectionError)) as e:
                resp.read()
            if isinstance(e.value, http.client.IncompleteRead):
                assert 0 < len(e.value.partial) < len(full)
                assert full.startswith(e.value.partial)
        elif kind == "truncated":
            data = resp.read()
            assert resp.status == 200 and int(resp.getheader("Content-Length")) == len(data)
            assert full.startswith(data) and len(data) < len(full)
            with pytest.raises(ValueError):
                json.loads(data)
        elif kind == "non_json":
            data = resp.read()
            assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/html")
            assert data.startswith(b"<html>")
        else:  # length: a valid answer, cut
            doc = json.loads(resp.read())
            assert resp.status == 200
            assert doc["choices"][0]["finish_reason"] == "length"
            assert doc["choices"][0]["message"]["content"] == reply[: len(reply) // 2]
        conn.close()
        stats = server.stats()
        assert stats["faults"] == {kind: 1}, kind
        assert stats["answered"] == (1 if kind == "length" else 0), kind


def test_hang_outlasts_the_client_timeout_then_answers(fake_server):
    script = {
        "replies": [{"match": ".", "content": "late"}],
        "faults": {"rate": 1.0, "kinds": ["hang"], "hang_s": 3},
    }
    server = fake_server(script)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        post(server, chat("hello"), timeout=1.0)
    assert 0.9 < time.monotonic() - t0 < 2.0
    assert server.stats()["faults"] == {"hang": 1}
    # a hang is a delay, not an error: a patient client gets the normal answer
    server.set_script({**script, "faults": {**script["faults"], "hang_s": 0.5}})
    t0 = time.monotonic()
    status, _, data = post(server, chat("hello again"))
    assert status == 200 and content_of(data) == "late"
    assert time.monotonic() - t0 >= 0.5


def test_faults_are_deterministic_per_body_and_attempt(module_fake_server):
    kinds = ["429", "500", "503", "reset", "truncated", "non_json", "length"]
    faults = {"rate": 0.4, "kinds": kinds, "seed": 3}
    script = {"replies": [{"match": ".", "content": "some reply text"}], "faults": faults}
    server = module_fake_server.use(script)
    bodies = [chat(f"request {i}") for i in range(60)]

    def run() -> list[str]:
        return [observe(server, b) for _ in range(3) for b in bodies]

    first = run()
    server.reset()  # attempt numbers start again from 0
    assert run() == first
    spec = Faults(0.4, tuple(kinds), seed=3)
    expected = [fault_for(spec, sha256_bytes(b), n) or "ok" for n in range(3) for b in bodies]
    assert first == expected
    share = sum(o != "ok" for o in first) / len(first)
    assert 0.25 < share < 0.55
    assert set(first) == {"ok", *kinds}
    counts = server.stats()["faults"]
    assert counts == {k: first.count(k) for k in kinds}


def test_only_first_faults_only_the_first_attempt(module_fake_server):
    server = module_fake_server.use(
        {
            "replies": [{"match": ".", "content": "x"}],
            "faults": {"rate": 1.0, "kinds": [503], "only_first": True},
        }
    )
    assert [observe(server, chat("same")) for _ in range(3)] == ["503", "ok", "ok"]


def test_outage_answers_503_to_every_completion(module_fake_server):
    server = module_fake_server.use({"replies": [{"match": ".", "content": "x"}], "outage": True})
    assert [observe(server, chat(f"q{i}")) for i in range(3)] == ["503"] * 3
    assert get(server, "/health")[0] == 200
    assert server.stats()["faults"] == {"outage": 3}


# ----------------------------------------------------------------- capacity


def timed_posts(server: Any, bodies: list[bytes], delays: list[float]) -> list[tuple[float, dict]]:
    """POST each body after its delay, concurrently; (finish time from start, doc) each."""
    t0 = time.monotonic()

    def one(i: int) -> tuple[float, dict]:
        time.sleep(delays[i])
        status, _, data = post(server, bodies[i])
        assert status == 200
        return time.monotonic() - t0, json.loads(data)

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(one, range(len(bodies))))


def capacity_script(total: float | None, per: float | None, tokens: int) -> dict:
    cap: dict[str, Any] = {"completion_tokens": {"fixed": tokens}}
    if total is not None:
        cap["tokens_per_s"] = total
    if per is not None:
        cap["per_request_tps"] = per
    return {"replies": [{"match": ".", "content": "x"}], "capacity": cap}


def test_capacity_processor_sharing_four_together(module_fake_server):
    server = module_fake_server.use(capacity_script(1000, 1000, 250))
    done = timed_posts(server, [chat(f"r{i}") for i in range(4)], [0, 0, 0, 0])
    times = [t for t, _ in done]
    # alone each would take 0.25 s; sharing 1000 tok/s four ways takes 1.0 s for all
    assert all(0.7 < t < 1.3 for t in times), times
    assert max(times) - min(times) < 0.15, times
    assert all(doc["usage"]["completion_tokens"] == 250 for _, doc in done)
    assert server.stats()["in_flight_max"] == 4


def test_capacity_per_request_cap(module_fake_server):
    server = module_fake_server.use(capacity_script(None, 100, 100))
    [(t, doc)] = timed_posts(server, [chat("one")], [0])
    assert 0.7 < t < 1.3, t
    assert doc["usage"]["completion_tokens"] == 100


def test_capacity_rates_are_recomputed_when_a_request_joins(module_fake_server):
    # A (500 tok) runs alone at 1000 tok/s for 0.25 s, then shares with B (500 tok):
    # A ends at 0.25 + 250/500 = 0.75 s, then B runs alone: 250 left at 1000 -> 1.0 s.
    server = module_fake_server.use(capacity_script(1000, 1000, 500))
    (ta, _), (tb, _) = timed_posts(server, [chat("A"), chat("B")], [0, 0.25])
    assert 0.6 < ta < 0.9, ta
    assert 0.85 < tb < 1.2, tb


def test_lognormal_completion_tokens_follow_the_request_sha(module_fake_server):
    dist = {"dist": "lognormal", "mu": 5.0, "sigma": 1.0, "cap": 300, "seed": 7}
    server = module_fake_server.use(
        {
            "replies": [{"match": ".", "content": "x"}],
            "capacity": {"tokens_per_s": 1e9, "completion_tokens": dist},
        }
    )
    bodies = [chat(f"q{i}") for i in range(20)]
    got = [json.loads(post(server, b)[2])["usage"]["completion_tokens"] for b in bodies]
    spec = TokenDist(mu=5.0, sigma=1.0, cap=300, seed=7)
    assert got == [draw_tokens(spec, sha256_bytes(b)) for b in bodies]
    assert all(1 <= n <= 300 for n in got) and len(set(got)) > 10
    assert json.loads(post(server, bodies[0])[2])["usage"]["completion_tokens"] == got[0]


# ----------------------------------------------------------- scripts and CLI


@pytest.mark.parametrize(
    "path", sorted((FIXTURES_DIR / "fake").glob("*.yaml")), ids=lambda p: p.name
)
def test_fixture_scripts_load(path: Path):
    load_script(path)


def test_demo_script_answers_the_demo_prompts(fake_server):
    server = fake_server(FIXTURES_DIR / "fake" / "demo.yaml")
    g = parse_gate_response(content_of(post(server, gate_prompt("[ToolResult] npm ERR! code"))[2]))
    assert g.update_gate and not g.exit_gate
    g = parse_gate_response(content_of(post(server, gate_prompt("[User] Thanks, bye!"))[2]))
    assert not g.update_gate and g.exit_gate
    judge = "<question> Which errors did the agent hit, and what fixed each one? </question>\n"
    judged = content_of(post(server, chat(judge + "<chunk> [ToolResult] Traceback </chunk>"))[2])
    assert judged.endswith("<evidence>yes</evidence>")
    judged = content_of(post(server, chat(judge + "<chunk> [User] hello </chunk>"))[2])
    assert judged.endswith("<evidence>no</evidence>")


ONE_OF = "needs exactly one of content, sequence, gate, judge"
NO_MATCH = "the default rule has no `match` or `seed`: it answers whatever no reply matched"


@pytest.mark.parametrize(
    ("script", "field", "why"),
    [
        ({"replies": [{"match": "x"}]}, "replies[0]", ONE_OF),
        (
            {"replies": [{"match": "x", "content": "a", "gate": {"check_if": "e"}}]},
            "replies[0]",
            ONE_OF,
        ),
        ({"replies": [{"content": "a"}]}, "replies[0].match", "is required"),
        (
            {"replies": [{"match": "x", "gate": {"next_if": "e"}}]},
            "replies[0].gate.check_if",
            "is required",
        ),
        (
            {"replies": [{"match": "x", "sequence": []}]},
            "replies[0].sequence",
            "[] should be non-empty",
        ),
        ({"default": {"match": "x", "content": "a"}}, "default", NO_MATCH),
        ({"default": {"seed": 1, "content": "a"}}, "default", NO_MATCH),
        (
            {"replies": [{"match": "x", "seed": 1.0, "content": "a"}]},
            "replies[0].seed",
            "1.0 is not of type 'integer'",
        ),
        ({"faults": {"rate": 1.5}}, "faults.rate", "1.5 is greater than the maximum of 1"),
        ({"faults": {"rate": True}}, "faults.rate", "True is not of type 'number'"),
        (
            {"faults": {"rate": 0.1, "kinds": ["timeout"]}},
            "faults.kinds[0]",
            "'timeout' is not one of ['429', '500', '503', 429, 500, 503, "
            "'hang', 'reset', 'truncated', 'non_json', 'length']",
        ),
        ({"faults": {"rate": 0.1, "seed": 3.0}}, "faults.seed", "3.0 is not of type 'integer'"),
        ({"latency_s": float("nan")}, "latency_s", "must be a finite number, got nan"),
        (
            {"capacity": {"completion_tokens": {"fixed": 3}}},
            "capacity",
            "needs tokens_per_s, per_request_tps or both",
        ),
        (
            {"capacity": {"tokens_per_s": 0}},
            "capacity.tokens_per_s",
            "0 is less than or equal to the minimum of 0",
        ),
        (
            {"capacity": {"tokens_per_s": 1, "completion_tokens": {"fixed": 3, "mu": 1}}},
            "capacity.completion_tokens.mu",
            "unknown field; allowed: fixed",
        ),
        (
            {"capacity": {"tokens_per_s": 1, "completion_tokens": {"dist": "lognormal", "mu": 1}}},
            "capacity.completion_tokens.sigma",
            "is required",
        ),
        (
            {"modle": "x"},
            "modle",
            "unknown field; allowed: "
            "model, replies, default, faults, outage, capacity, latency_s, shapes",
        ),
        (
            {"shapes": [{"kind": "teapot"}]},
            "shapes[0].kind",
            "'teapot' is not one of ['empty_choices', 'null_content', 'sse', "
            "'echo_authorization', 'not_found', 'huge_body']",
        ),
        ({"shapes": [{"kind": "huge_body"}]}, "shapes[0].bytes", "is required"),
        (
            {"shapes": [{"kind": "huge_body", "bytes": 10}]},
            "shapes[0].bytes",
            "10 is less than the minimum of 1024",
        ),
        (
            {"shapes": [{"kind": "sse", "bytes": 2048}]},
            "shapes[0]",
            "bytes, piece_bytes, piece_delay_s and content_length belong to a huge_body shape",
        ),
        (
            {"shapes": [{"kind": "sse", "match": "("}]},
            "shapes[0].match",
            "bad regex '(': missing ), unterminated subpattern at position 0",
        ),
        ({"shapes": {"kind": "sse"}}, "shapes", "{'kind': 'sse'} is not of type 'array'"),
        (["model", "x"], None, "['model', 'x'] is not of type 'object'"),
    ],
)
def test_bad_scripts_name_the_field(script: Any, field: str | None, why: str):
    """Checked by fake_script.schema.yaml; the error names the field and says why."""
    with pytest.raises(ScriptError) as e:
        load_script(script)
    assert (e.value.field, e.value.why) == (field, why)


def test_script_file_errors_name_file_line_and_field(tmp_path: Path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("model: a\nmodel: b\n", encoding="utf-8")
    with pytest.raises(ScriptError) as e:
        load_script(dup)
    assert (e.value.source, e.value.line, e.value.field) == (str(dup), 2, None)
    bad = tmp_path / "bad.yaml"
    bad.write_text("faults: {rate: 2}\n", encoding="utf-8")
    with pytest.raises(ScriptError) as e:
        load_script(bad)
    assert str(e.value) == f"{bad}: field 'faults.rate' 2 is greater than the maximum of 1"


def test_fake_server_script_with_duplicate_keys(tmp_path: Path) -> None:
    text = (FIXTURES_DIR / "fake" / "demo.yaml").read_text(encoding="utf-8")
    path = tmp_path / "script.yaml"
    path.write_text(text + "model: other-model\n")
    with pytest.raises(ScriptError, match="duplicate key 'model'"):
        load_script(path)


def test_a_valid_script_fills_the_defaults():
    script = load_script(
        {
            "replies": [{"match": "x", "gate": {"check_if": "e"}}],
            "default": {"sequence": ["a", "b"]},
            "faults": {"rate": 0.5, "kinds": [503, "hang"]},
            "capacity": {"per_request_tps": 10, "completion_tokens": {"fixed": 4}},
        }
    )
    assert (script.model, script.outage, script.latency_s, script.shapes) == (
        "fake-model",
        False,
        0.0,
        (),
    )
    assert script.replies[0].gate.check_if.pattern == "e" and script.replies[0].gate.next_if is None
    assert (script.default.index, script.default.match, script.default.sequence) == (
        -1,
        None,
        ("a", "b"),
    )
    assert script.faults == Faults(0.5, ("503", "hang"), 0, 0.0, 30.0, False)
    assert script.capacity == Capacity(math.inf, 10.0, TokenDist(fixed=4))


def test_main_port_file_sigterm_and_loopback_only(tmp_path: Path):
    script = tmp_path / "s.yaml"
    script.write_text("replies:\n  - match: '.'\n    content: hi\n", encoding="utf-8")
    port_file = tmp_path / "port"
    command = [sys.executable, "-m", "support.fake_server", "--script", str(script)]
    proc = subprocess.Popen(
        [*command, "--port-file", str(port_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )
    try:
        line = proc.stdout.readline().decode()
        port = int(port_file.read_text())
        assert line == f"listening http://127.0.0.1:{port}/v1\n"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert time.monotonic() - t0 < 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["port", "s.yaml"]
    done = subprocess.run(
        [*command, "--host", "0.0.0.0"], capture_output=True, timeout=30, env=child_env()
    )
    assert done.returncode == 1
    assert b"loopback" in done.stderr and done.stdout == b""


def test_main_names_the_bad_field_of_a_script_file(tmp_path: Path):
    script = tmp_path / "bad.yaml"
    script.write_text("replies:\n  - match: '.'\n    gate: {next_if: DONE}\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "support.fake_server", "--script", str(script)],
        capture_output=True,
        timeout=30,
        env=child_env(),
    )
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode() == (
        f"fake_server: error: {script}: field 'replies[0].gate.check_if' is required\n"
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.org", "::", "127.0.0.1.nip.io"])
def test_non_loopback_hosts_are_refused(host: str):
    with pytest.raises(FakeServerError, match="loopback"):
        check_host(host)


def test_loopback_hosts_are_accepted():
    assert [check_host(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost")] == [
        "127.0.0.1",
        "127.0.0.2",
        "::1",
        "127.0.0.1",
    ]


def test_misbehaving_shapes_as_seen_on_the_wire(module_fake_server):
    """Each scripted misbehaviour, for the requests its `match` finds."""
    server = module_fake_server.use(
        {
            "model": "m",
            "default": {"content": "hi"},
            "shapes": [
                {"kind": "empty_choices", "match": "^empty$"},
                {"kind": "null_content", "match": "^null$"},
                {"kind": "sse", "match": "^sse$"},
                {"kind": "echo_authorization", "match": "^echo$"},
                {"kind": "not_found", "match": "^missing$"},
            ],
        }
    )
    assert json.loads(post(server, chat("empty"))[2])["choices"] == []
    status, _, body = post(server, chat("null"))
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] is None
    status, headers, body = post(server, chat("sse"))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert body.startswith(b"data: {") and body.endswith(b"data: [DONE]\n\n")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-echoed"}
    try:
        conn.request("POST", "/v1/chat/completions", body=chat("echo"), headers=headers)
        echoed = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert echoed["received_headers"] == {"authorization": "Bearer sk-echoed"}
    status, _, body = post(server, chat("missing"))
    error = json.loads(body)["error"]
    assert status == 404 and error["code"] == "model_not_found"
    assert error["message"].startswith("The model `fake-model` does not exist")
    assert content_of(post(server, chat("fine"))[2]) == "hi"
    assert server.stats()["faults"] == {
        k: 1 for k in ("empty_choices", "null_content", "sse", "echo_authorization", "not_found")
    }


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
def test_a_huge_body_is_a_completion_of_that_size_streamed(module_fake_server, announced):
    """huge_body: a 200 completion of exactly `bytes` bytes (its content padded), with
    a Content-Length or chunked; a client that hangs up ends it, stats count what was
    written."""
    server = module_fake_server.use(
        {
            "model": "m",
            "default": {"content": "hi"},
            "shapes": [
                {"kind": "huge_body", "match": "^huge$", "bytes": 3_000_000,
                 "piece_bytes": 4096, "content_length": announced},
            ],
        }
    )  # fmt: skip
    status, headers, body = post(server, chat("huge"))
    assert status == 200 and len(body) == 3_000_000
    assert (headers.get("Content-Length") == "3000000") is announced
    assert (headers.get("Transfer-Encoding") == "chunked") is not announced
    data = json.loads(body)
    assert data["model"] == "m" and set(data["choices"][0]["message"]["content"]) == {"x"}
    assert server.stats()["streamed_bytes"] == 3_000_000
    assert content_of(post(server, chat("fine"))[2]) == "hi"
    # a client that reads the headers and hangs up: the server stops writing
    server.use(
        {"default": {"content": "hi"}, "shapes": [{"kind": "huge_body", "bytes": 500_000_000}]}
    )
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=chat("any"))
    assert conn.getresponse().status == 200
    conn.close()
    time.sleep(0.5)
    streamed = server.stats()["streamed_bytes"]
    time.sleep(0.5)
    assert server.stats()["streamed_bytes"] == streamed < 50_000_000
    assert server.stats()["faults"] == {"huge_body": 1}


# ------------------------------------------------------------------ boundary


def imported_modules(package: Path) -> dict[str, set[str]]:
    """Top-level names each module of `package` imports (absolute imports only)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(package))] = names
    return found


def test_the_product_imports_neither_test_support_nor_aiohttp():
    """tests/support is not shipped: a product module importing it would fail in a
    plain `pip install grumem`. aiohttp is the client's transport and the calibration
    page's server: only grumem.llm.transport (requests and bodies) and
    grumem.tools.calibrate_serve (the page) import it."""
    package = Path(grumem.__file__).parent
    allowed = {"llm/transport.py": {"aiohttp"}, "tools/calibrate_serve.py": {"aiohttp"}}
    offenders = {
        module: sorted((names & {"support", "aiohttp"}) - allowed.get(module, set()))
        for module, names in imported_modules(package).items()
        if (names & {"support", "aiohttp"}) - allowed.get(module, set())
    }
    assert offenders == {}
