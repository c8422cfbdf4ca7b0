"""The loop's rules for one answer: what it says of the gates, the memory after the
turn, whether the trajectory stops, and how a turn's user message and seeds are made.

The turn order that applies them (grumem.core.turn_loop) drives the `responses`
stage and verl's agent loop; the `gates` stage re-applies them to a recording, so
a recording and the log can never disagree silently.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol

from grumem.core.gate_parser import MAX_RAW, parse_gate_response
from grumem.core.recording import NOT_A_CHAT_COMPLETION, chat_content, response_bytes
from grumem.core.template import memory_text
from grumem.core.tokens import Tokens, token_bound
from grumem.errors import ParseError
from grumem.records.gate import ParseFailure
from grumem.records.response import Attempt

__all__ = [
    "Gate",
    "MemorySlot",
    "ask_seed",
    "interpret",
    "interpret_content",
    "memory_after",
    "stops",
    "user_message",
]


@dataclass(frozen=True)
class Gate:
    """What one answer says: the gates of a strict parse, or nulls and why it did not
    parse (no gate is ever defaulted). `content` is the answer's text, None when no
    chat completion came back."""

    parsed: bool
    update_gate: bool | None
    exit_gate: bool | None
    candidate: str | None
    think: str | None
    content: str | None
    finish_reason: str | None
    parse_error: ParseFailure | None

    @classmethod
    def failed(cls, error: ParseFailure, content: str | None, finish: str | None) -> Gate:
        return cls(False, None, None, None, None, content, finish, error)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a gate record writes them, in its order."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.parse_error is not None:
            out["parse_error"] = self.parse_error.to_dict()
        return out


def interpret(
    response: Attempt, memory_budget: int | None = None, tokens: Tokens | None = None
) -> Gate:
    """The gate of one ask from its final HTTP attempt: a parse or a recorded failure.

    A candidate memory over `memory_budget` tokens (counted by `tokens`, which a
    budget needs) is the model's format failure (tag `update`): using it would
    make the next prompt over budget."""
    _check_counter(memory_budget, tokens)
    raw = response_bytes(response) if response.body is not None else None
    if response.status != 200 or raw is None:
        error = response.error or f"HTTP {response.status}"
        why = ParseFailure("response", f"no answer: {error}", (response.body or "")[:MAX_RAW])
        return Gate.failed(why, None, None)
    try:
        content, finish = chat_content(raw)
    except NOT_A_CHAT_COMPLETION as e:
        reason = f"not a chat completion: {e}"
        why = ParseFailure("response", reason, (response.body or "")[:MAX_RAW])
        return Gate.failed(why, None, None)
    return interpret_content(content, finish, memory_budget, tokens)


def interpret_content(
    content: str,
    finish: str | None = None,
    memory_budget: int | None = None,
    tokens: Tokens | None = None,
) -> Gate:
    """The gate of one answer's text: the strict parse, or its format failure.

    The same rules whether the text came in a recorded chat completion (interpret)
    or was decoded from a policy's tokens (grumem.verl's agent loop)."""
    _check_counter(memory_budget, tokens)
    try:
        g = parse_gate_response(content)
    except ParseError as e:
        return Gate.failed(ParseFailure.convert(e.to_json()), content, finish)
    text = memory_text(g.candidate)
    if memory_budget is not None and tokens is not None and token_bound(text) > memory_budget:
        # cached: a candidate that becomes the memory is counted again for the next turn
        n = tokens.count_cached(text)
        if n > memory_budget:
            reason = (
                f"candidate memory is {n} tokens, over budget.memory {memory_budget}:"
                " memory stays M_(t-1)"
            )
            return Gate.failed(ParseFailure("update", reason, content[:MAX_RAW]), content, finish)
    return Gate(True, g.update_gate, g.exit_gate, g.candidate, g.think, content, finish, None)


def _check_counter(memory_budget: int | None, tokens: Tokens | None) -> None:
    if memory_budget is not None and tokens is None:
        raise TypeError("interpret: a memory_budget needs the tokens that count it")


def memory_after(memory_before: str | None, gate: Gate) -> str | None:
    """U_t true: the candidate, verbatim. False or unparsed: M_{t-1} stays."""
    if gate.parsed and gate.update_gate:
        return gate.candidate
    return memory_before


class MemorySlot(Protocol):
    """A turn's user message around its memory slot (a prompt record is one)."""

    @property
    def prefix(self) -> str: ...

    @property
    def suffix(self) -> str: ...


def user_message(prompt: MemorySlot, memory: str | None) -> str:
    """The user message of a turn: its prompt with M_{t-1} in the memory slot."""
    return prompt.prefix + memory_text(memory) + prompt.suffix


def ask_seed(ask: int, samples: int, sample: int) -> int:
    """The sampling seed of an ask: a re-ask must be a distinct request, or the
    cache would answer it with the same failure, so it advances past every sample's."""
    return ask * samples + sample


def stops(level: str, gate: Gate) -> bool:
    """Whether the trajectory ends after this turn: only at L2, only on a parsed `end`
    (at L1 the exit gate is recorded, never obeyed)."""
    return level == "L2" and gate.parsed and bool(gate.exit_gate)
