"""The strict parser of the model's four-tag gate response (card M1.4).

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

Tags are matched as exact, lower-case strings; `<Check>` is just text. Tags
are located with str.find/rfind/count over the whole response, never with a
pattern that stops at its first match (that would accept duplicates).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from grumem.errors import GrumemError

MAX_RAW = 2000  # characters of the response kept in a ParseError
_SHOW = 100  # characters of a bad value shown in the reason
CHECK_VALUES = {"yes": True, "no": False}
NEXT_VALUES = {"continue": False, "end": True}


class ParseError(GrumemError):
    """A response that is not exactly the four-tag shape; names the failing tag."""

    def __init__(self, tag: str, reason: str, text: str):
        self.tag = tag  # think, check, update or next
        self.reason = reason
        self.raw = text
        if len(text) > MAX_RAW:
            self.raw = f"{text[:MAX_RAW]}...[truncated: {len(text)} characters in all]"
        super().__init__(f"<{tag}>: {reason}")

    def to_json(self) -> dict[str, str]:
        return {"tag": self.tag, "reason": self.reason, "raw": self.raw}


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
    think, pos = _think_block(text)
    check, pos = _tag_text(text, "check", pos, "</think>")
    update_gate = _value(text, "check", check, CHECK_VALUES)
    candidate, pos = _tag_text(text, "update", pos, "</check>")
    exit_value, _ = _tag_text(text, "next", pos, "</update>")
    exit_gate = _value(text, "next", exit_value, NEXT_VALUES)
    return GateResponse(think, update_gate, candidate, exit_gate)


def _think_block(text: str) -> tuple[str, int]:
    """The trimmed think text and the index just past the block's `</think>`."""
    first_check = text.find("<check>")
    head = text if first_check < 0 else text[:first_check]
    start = head.find("<think>")
    if start < 0:
        raise ParseError("think", "no <think> before the first <check>", text)
    if 0 <= head.find("</think>") < start:
        raise ParseError("think", "</think> before the first <think>", text)
    close = head.rfind("</think>")
    if close < start:
        raise ParseError("think", "<think> is not closed before the first <check>", text)
    end = close + len("</think>")
    rest = text[end:]
    if "<think>" in rest or "</think>" in rest:
        where = "before <check>" if "<think>" in head[end:] else "after <check>"
        raise ParseError("think", f"think tag after the think block ({where})", text)
    return text[start + len("<think>") : close].strip(), end


def _tag_text(text: str, tag: str, pos: int, prev: str) -> tuple[str, int]:
    """The trimmed inner text of the one `<tag>...</tag>`, which must follow `pos` (`prev`),
    and the index just past its close tag."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    n_open, n_close = text.count(open_tag), text.count(close_tag)
    if n_open == 0 and n_close == 0:
        raise ParseError(tag, f"missing {open_tag}", text)
    for t, n in ((open_tag, n_open), (close_tag, n_close)):
        if n > 1:
            raise ParseError(tag, f"duplicate {t}: found {n}, exactly one allowed", text)
    if n_open == 0:
        raise ParseError(tag, f"{close_tag} without {open_tag}", text)
    if n_close == 0:
        raise ParseError(tag, f"{open_tag} is never closed", text)
    start, close = text.find(open_tag), text.find(close_tag)
    if close < start:
        raise ParseError(tag, f"{close_tag} before {open_tag}", text)
    if start < pos:
        raise ParseError(tag, f"out of order: {open_tag} must come after {prev}", text)
    return text[start + len(open_tag) : close].strip(), close + len(close_tag)


def _value(text: str, tag: str, value: str, allowed: dict[str, bool]) -> bool:
    if value not in allowed:
        shown = repr(value[:_SHOW]) + ("..." if len(value) > _SHOW else "")
        raise ParseError(tag, f"value {shown} is not {' or '.join(allowed)}", text)
    return allowed[value]
