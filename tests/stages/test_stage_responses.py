"""Stage `responses`: the stage drives the GRU-Mem turn order (grumem.core.turn_loop)
and writes what it recorded: the same loop answered from a list of the recorded
answers asks exactly the recorded requests, byte for byte, and makes the recorded
lines. A job whose requests failed writes nothing and says what failed, how, and
that a rerun sends only those (the answers received are cached)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from itertools import groupby
from pathlib import Path

import yaml

from grumem.config.settings import settings_from_args
from grumem.core.json_text import sha256_text
from grumem.core.turn_loop import Abort, Reply, TurnLoop, abort_record, exchange_record
from grumem.io.typed import read_records, read_responses
from grumem.records.prompt import PromptRecord
from grumem.records.response import AbortRecord, Attempt, ExchangeRecord, Request
from grumem.stages.responses import LoopSettings, failed_requests
from support.verl_venv import samples2_script
from support.workflow import DEMO, env, write_config

SHA = "0" * 64


def exchange(status: int | None, error: str | None) -> ExchangeRecord:
    attempt = Attempt(attempt=1, status=status, body=None, sha256=None, latency_s=0.5, error=error)
    request = Request("{}", sha256_text("{}"))
    return ExchangeRecord(
        trajectory_id="p/q/s/0",
        t=1,
        ask=0,
        chunk_sha=SHA,
        memory_before=None,
        request=request,
        response=attempt,
        attempts=[attempt],
    )


def abort(detail: str, reason: str = "request_failed") -> AbortRecord:
    return AbortRecord("p/q/s/0", 1, SHA, reason, None, detail)  # type: ignore[arg-type]


def test_no_failed_request_is_no_message() -> None:
    records = [exchange(200, None), abort("x", reason="budget")]
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


# ---------------------------------------------- recorded answers in, recorded requests out


def grumem(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", *args], capture_output=True, text=True, env=env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def recorded_run(work: Path, base_url: str, **config: dict) -> tuple[dict, Path, Path]:
    """The demo's prompts and the responses the stage recorded for them, with the
    settings both commands ran with."""
    # a cache of its own: another test's answers to the same requests are not these
    llm = {"cache_dir": str(work / "cache")}
    path = write_config(work, base_url, llm=llm, **config)
    prompts, responses = work / "prompts.jsonl", work / "responses.jsonl"
    chunks = sorted(str(p) for p in (DEMO / "chunks").glob("*.jsonl"))
    queries = str(DEMO / "queries.yaml")
    grumem("prompts", "--config", str(path), "--project", "demo", "--queries", queries,
           "--out", str(prompts), *chunks)  # fmt: skip
    grumem("responses", "--config", str(path), "--prompts", str(prompts), "--out", str(responses))
    settings = settings_from_args(argparse.Namespace(settings=None, config=path, connection=None))
    return settings, prompts, responses


def replay(settings: dict, prompts_path: Path, responses_path: Path) -> dict[str, int]:
    """The loop of each recorded trajectory answered from the list of its recorded
    answers: every request it asks is the recorded body, byte for byte, and the lines
    it makes are the file's. What the recording held, counted."""
    s = LoopSettings.from_settings(settings)
    prompts = [p for _, p in read_records(prompts_path, PromptRecord)]
    lines = [r for _, r in read_responses(responses_path)]
    recorded = {tid: list(g) for tid, g in groupby(lines, key=lambda r: r.trajectory_id)}
    made: list[ExchangeRecord | AbortRecord] = []
    failed: list[str] = []  # the tag of each answer that did not parse
    for tid, group in groupby(prompts, key=lambda p: p.trajectory_id):
        answers = [r for r in recorded[tid] if isinstance(r, ExchangeRecord)]
        ps = list(group)
        loop = TurnLoop(ps, s.rules, ps[0].sample)
        for step in loop:
            if isinstance(step, Abort):
                made.append(abort_record(step))
                break
            want = answers.pop(0)
            body = s.body(step)
            assert body == want.request.body, (tid, step.t, step.ask)
            assert json.loads(body)["messages"] == step.messages
            reply = Reply(
                Request(body, sha256_text(body)), want.response, want.attempts, want.response_model
            )
            answered = loop.answer(reply)
            made.append(exchange_record(answered))
            if answered.gate.parse_error is not None:
                failed.append(answered.gate.parse_error.tag)
        assert answers == [], f"{tid}: the loop ended before the recording did"
    data = b"".join(r.encode() + b"\n" for r in made)
    assert data == responses_path.read_bytes()
    asks = [r for r in made if isinstance(r, ExchangeRecord)]
    return {
        "trajectories": len(recorded),
        "asks": len(asks),
        "re-asks": sum(r.ask > 0 for r in asks),
        "turns": len({(r.trajectory_id, r.t) for r in asks}),
        "prompts": len(prompts),
        "unparsed": failed.count("think"),
        "memory over budget": failed.count("update"),
    }


def test_the_demo_recording_is_the_loop_answered_from_a_list(tmp_path, fake_server) -> None:
    """The demo as the pinned corpus records it (fake server, L1, one sample)."""
    server = fake_server(yaml.safe_load((DEMO.parent / "fake" / "demo.yaml").read_text()))
    counts = replay(*recorded_run(tmp_path, server.base_url))
    assert counts == {
        "trajectories": 10,
        "asks": 72,
        "re-asks": 0,
        "turns": 72,
        "prompts": 72,
        "unparsed": 0,
        "memory over budget": 0,
    }


GARBLED = "I think the memory should change."


def test_re_asks_l2_stops_and_memory_failures_are_the_loop_answered_from_a_list(
    tmp_path, fake_server
) -> None:
    """Two samples answered apart, L2 (a section the gates' next_if finds ends a
    trajectory), a small memory budget (a growing memory becomes a format failure),
    npm sections garbled at sample 0's first ask (asked again, seed 2) and postgres
    sections garbled at every ask (the turn never parses)."""
    script = samples2_script()
    for rule in script["replies"][-2:]:  # both samples' gates: end on mid-session sections
        rule["gate"]["next_if"] = r"(?i)\b(namespaces|git diff|Nice|bye)\b"
    script["replies"][-2:-2] = [
        {"match": "(?is)<section>.*postgres", "content": GARBLED},
        {"match": "(?is)<section>.*npm", "seed": 0, "content": GARBLED},
    ]
    server = fake_server(script)
    loop = {"level": "L2", "samples": 2, "parse_retries": 1}
    settings, prompts, responses = recorded_run(
        tmp_path, server.base_url, loop=loop, budget={"memory": 60}
    )
    counts = replay(settings, prompts, responses)
    assert counts["trajectories"] == 20 and counts["re-asks"] > 5
    assert counts["unparsed"] > counts["re-asks"]  # postgres turns fail at every ask
    assert counts["memory over budget"] > 0
    assert counts["turns"] < counts["prompts"]  # L2 stopped some trajectories early
    seeds = {json.loads(r.request.body)["seed"] for _, r in read_responses(responses)}
    assert seeds == {0, 1, 2, 3}  # ask * samples + sample
