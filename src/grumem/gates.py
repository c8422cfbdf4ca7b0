"""Gates: what a recorded response means for the loop, and the offline re-parse.

`interpret` and `memory_after` are the loop's semantics (DESIGN "Loop
semantics"); the rollout uses them live and the `gates` stage re-applies them
to the recording, so a recording and the log can never disagree silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from itertools import groupby

from grumem.gate_parser import MAX_RAW, ParseError, parse_gate_response
from grumem.prompt import memory_text
from grumem.recording import chat_content, check_request, check_response, response_bytes
from grumem.records import RecordError, read_jsonl
from grumem.tokens import count_tokens

_NULL_GATE = {"update_gate": None, "exit_gate": None, "candidate": None, "think": None}


def response_content(body: str | bytes) -> tuple[str, str | None]:
    """(content, finish_reason) of an OpenAI chat.completion body; ValueError if it has none."""
    return chat_content(body)


def interpret(response: dict, memory_budget: int | None = None) -> dict:
    """Gate fields for one ask from its final HTTP attempt: a parse or a recorded failure.

    No gate is ever defaulted: anything but an exact parse records nulls. A
    candidate memory over `memory_budget` tokens is the model's format failure
    (tag `update`): using it would make the next prompt over budget."""
    raw = response_bytes(response) if response.get("body") is not None else None
    if response.get("status") != 200 or raw is None:
        error = response.get("error") or f"HTTP {response.get('status')}"
        return {
            "parsed": False,
            **_NULL_GATE,
            "content": None,
            "finish_reason": None,
            "parse_error": {
                "tag": "response",
                "reason": f"no answer: {error}",
                "raw": (response.get("body") or "")[:MAX_RAW],
            },
        }
    try:
        content, finish = chat_content(raw)
    except (ValueError, KeyError, IndexError, TypeError) as e:
        return {
            "parsed": False,
            **_NULL_GATE,
            "content": None,
            "finish_reason": None,
            "parse_error": {
                "tag": "response",
                "reason": f"not a chat completion: {e}",
                "raw": response["body"][:MAX_RAW],
            },
        }
    try:
        g = parse_gate_response(content)
    except ParseError as e:
        return {
            "parsed": False,
            **_NULL_GATE,
            "content": content,
            "finish_reason": finish,
            "parse_error": e.to_json(),
        }
    if memory_budget is not None:
        tokens = count_tokens(memory_text(g.candidate))
        if tokens > memory_budget:
            return {
                "parsed": False,
                **_NULL_GATE,
                "content": content,
                "finish_reason": finish,
                "parse_error": {
                    "tag": "update",
                    "reason": f"candidate memory is {tokens} tokens, over budget.memory"
                    f" {memory_budget}: memory stays M_(t-1)",
                    "raw": content[:MAX_RAW],
                },
            }
    return {
        "parsed": True,
        "update_gate": g.update_gate,
        "exit_gate": g.exit_gate,
        "candidate": g.candidate,
        "think": g.think,
        "content": content,
        "finish_reason": finish,
        "parse_error": None,
    }


def memory_after(memory_before: str | None, gate: dict) -> str | None:
    """U_t true: the candidate, verbatim. False or unparsed: M_{t-1} stays."""
    return gate["candidate"] if gate["parsed"] and gate["update_gate"] else memory_before


def user_message(body: str) -> str:
    return json.loads(body)["messages"][-1]["content"]


def regate(
    prompts_path: str | os.PathLike[str],
    responses_path: str | os.PathLike[str],
    memory_budget: int | None = None,
) -> Iterator[dict]:
    """Re-parse every recorded ask strictly, checking the recording as it goes.

    Fails naming file and line when a body no longer matches its sha256, or
    when a recorded request holds a memory that the recomputed chain disagrees
    with (the recording was edited, or the loop has a bug)."""
    prompts = {(p["trajectory_id"], p["t"]): p for p in read_jsonl(prompts_path, "prompt")}
    lines = enumerate(read_jsonl(responses_path, "response"), start=1)
    for tid, group in groupby(lines, key=lambda item: item[1]["trajectory_id"]):
        memory: str | None = None
        t_seen = 0
        for line, rec in group:
            if rec["t"] < t_seen:
                raise RecordError(responses_path, line, "t", f"turn {rec['t']} after turn {t_seen}")
            if rec["kind"] == "abort":
                continue
            if rec["t"] > t_seen:
                turn_memory, t_seen = memory, rec["t"]
            _check_exchange(responses_path, line, rec, prompts, turn_memory)
            gate = interpret(rec["response"], memory_budget)
            # every ask of a turn starts from the same memory; the last ask decides
            memory = memory_after(turn_memory, gate)
            yield {
                "trajectory_id": tid,
                "t": rec["t"],
                "ask": rec["ask"],
                **gate,
                "memory_after": memory,
            }


def _check_exchange(path, line: int, rec: dict, prompts: dict, memory: str | None) -> None:
    body = check_request(path, line, rec["request"])
    check_response(path, line, rec["response"])
    prompt = prompts.get((rec["trajectory_id"], rec["t"]))
    if prompt is None:
        raise RecordError(
            path, line, "t", f"no prompt record for {rec['trajectory_id']} t={rec['t']}"
        )
    if rec["memory_before"] != memory:
        raise RecordError(
            path,
            line,
            "memory_before",
            "disagrees with the memory recomputed from the recorded gates",
        )
    expected = prompt["prefix"] + memory_text(memory) + prompt["suffix"]
    try:
        sent = user_message(body)
    except (ValueError, KeyError, IndexError) as e:
        raise RecordError(path, line, "request.body", f"not a chat request: {e}") from None
    if sent != expected:
        raise RecordError(
            path, line, "request.body", "user message differs from prompt + recomputed memory"
        )
    if rec["chunk_sha"] != prompt["chunk_sha"]:
        raise RecordError(path, line, "chunk_sha", "differs from the prompt record")
