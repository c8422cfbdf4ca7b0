"""The strict parser of the model's four-tag gate response.

A lenient parser fabricates gate decisions, and a fabricated decision looks
exactly like a real one in the log. So a response parses only if it has this
shape, with any text (prose, markdown fences) around and between the tags:

    <think>...</think> <check>yes|no</check> <update>...</update> <next>continue|end</next>

- The think block runs from the first `<think>` to the LAST `</think>` before
  the first `<check>`, so nested or repeated think blocks end up inside it.
  A `</think>` before the first `<think>`, or a think tag after the block, is
  an error.
- `<check>`, `<update>` and `<next>` occur exactly once each in the whole
  response (open and close tag), in that order, after the think block: a tag
  out of order or nested in another is an error, not a guess.
- Inner text is trimmed of surrounding whitespace and otherwise kept verbatim;
  `<check>` must then be exactly `yes` or `no`, `<next>` `continue` or `end`.

Tags are matched as exact, lower-case strings; `<Check>` is just text. The
tag logic (think block, exactly-one-tag, enumerated values) is grumem.core.tags,
shared with the judge parser.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# ParseError and MAX_RAW live in grumem.core.tags; they are imported from here too
from grumem.core.tags import MAX_RAW, enum_value, tag_text, think_block
from grumem.errors import ParseError

__all__ = [
    "CHECK_VALUES",
    "MAX_RAW",
    "NEXT_VALUES",
    "GateResponse",
    "ParseError",
    "parse_gate_response",
]

CHECK_VALUES = {"yes": True, "no": False}
NEXT_VALUES = {"continue": False, "end": True}


@dataclass(frozen=True)
class GateResponse:
    """One parsed turn: U_t is `update_gate`, M̂_t `candidate`, E_t `exit_gate`."""

    think: str
    update_gate: bool
    candidate: str  # kept when update_gate is False too: the log shows what it would have been
    exit_gate: bool

    def to_json(self) -> dict[str, str | bool]:
        return asdict(self)


def parse_gate_response(text: str) -> GateResponse:
    """Parse a model response strictly; raise ParseError naming the first failing tag."""
    think, pos = think_block(text, "check", required=True)
    check, pos = tag_text(text, "check", after=(pos, "</think>"))
    update_gate = enum_value(text, "check", check, CHECK_VALUES)
    candidate, pos = tag_text(text, "update", after=(pos, "</check>"))
    exit_value, _ = tag_text(text, "next", after=(pos, "</update>"))
    exit_gate = enum_value(text, "next", exit_value, NEXT_VALUES)
    return GateResponse(think, update_gate, candidate, exit_gate)
