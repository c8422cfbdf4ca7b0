"""The loop's semantics (DESIGN "Loop semantics"): what a recorded response means
for the gates, and the memory after a turn.

The `responses` stage uses them live and the `gates` stage re-applies them to
the recording, so a recording and the log can never disagree silently.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from grumem.core.gate_parser import MAX_RAW, parse_gate_response
from grumem.core.recording import NOT_A_CHAT_COMPLETION, chat_content, raw_body
from grumem.core.template import memory_text
from grumem.core.tokens import Tokens, token_bound
from grumem.errors import ParseError
from grumem.records.base import or_none
from grumem.records.prompt import PromptRecord
from grumem.records.response import Attempt

_NULL_GATE = {"update_gate": None, "exit_gate": None, "candidate": None, "think": None}


def interpret(
    response: Attempt, memory_budget: int | None = None, tokens: Tokens | None = None
) -> dict[str, Any]:
    """Gate fields for one ask from its final HTTP attempt: a parse or a recorded failure.

    No gate is ever defaulted: anything but an exact parse records nulls. A
    candidate memory over `memory_budget` tokens (counted by `tokens`, which a
    budget needs) is the model's format failure (tag `update`): using it would
    make the next prompt over budget."""
    _check_counter(memory_budget, tokens)
    body = response.body
    raw = raw_body(body, or_none(response.body_b64)) if body is not None else None
    if response.status != 200 or raw is None:
        error = response.error or f"HTTP {response.status}"
        return {
            "parsed": False,
            **_NULL_GATE,
            "content": None,
            "finish_reason": None,
            "parse_error": {
                "tag": "response",
                "reason": f"no answer: {error}",
                "raw": (body or "")[:MAX_RAW],
            },
        }
    try:
        content, finish = chat_content(raw)
    except NOT_A_CHAT_COMPLETION as e:
        return {
            "parsed": False,
            **_NULL_GATE,
            "content": None,
            "finish_reason": None,
            "parse_error": {
                "tag": "response",
                "reason": f"not a chat completion: {e}",
                "raw": (body or "")[:MAX_RAW],
            },
        }
    return interpret_content(content, finish, memory_budget, tokens)


def interpret_content(
    content: str,
    finish: str | None = None,
    memory_budget: int | None = None,
    tokens: Tokens | None = None,
) -> dict[str, Any]:
    """Gate fields for one answer's text: the strict parse, or its format failure.

    The same rules whether the text came in a recorded chat completion (interpret)
    or was decoded from a policy's tokens (grumem.verl's agent loop)."""
    _check_counter(memory_budget, tokens)
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
    text = memory_text(g.candidate)
    if memory_budget is not None and tokens is not None and token_bound(text) > memory_budget:
        # cached: a candidate that becomes the memory is counted again for the next turn
        n = tokens.count_cached(text)
        if n > memory_budget:
            return {
                "parsed": False,
                **_NULL_GATE,
                "content": content,
                "finish_reason": finish,
                "parse_error": {
                    "tag": "update",
                    "reason": f"candidate memory is {n} tokens, over budget.memory"
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


def _check_counter(memory_budget: int | None, tokens: Tokens | None) -> None:
    if memory_budget is not None and tokens is None:
        raise TypeError("interpret: a memory_budget needs the tokens that count it")


def memory_after(memory_before: str | None, gate: dict[str, Any]) -> str | None:
    """U_t true: the candidate, verbatim. False or unparsed: M_{t-1} stays."""
    if gate["parsed"] and gate["update_gate"]:
        candidate: str = gate["candidate"]  # a parsed gate's candidate is its text
        return candidate
    return memory_before


class PromptHalves(NamedTuple):
    """The user message of a turn around its memory slot (a prompt record's halves)."""

    prefix: str
    suffix: str


def user_message(prompt: PromptRecord | PromptHalves, memory: str | None) -> str:
    """The user message of a turn: its prompt with M_{t-1} in the memory slot."""
    return prompt.prefix + memory_text(memory) + prompt.suffix


def ask_seed(ask: int, samples: int, sample: int) -> int:
    """The sampling seed of an ask: a re-ask must be a distinct request, or the
    cache would answer it with the same failure, so it advances past every sample's."""
    return ask * samples + sample


def stops(level: str, gate: dict[str, Any]) -> bool:
    """Whether the trajectory ends after this turn: only at L2, only on a parsed `end`
    (at L1 the exit gate is recorded, never obeyed)."""
    return level == "L2" and bool(gate["parsed"]) and bool(gate["exit_gate"])
