"""The strict parser of an LLM judge's answer: `<think>…</think><evidence>yes|no</evidence>`.

A lenient parser would invent labels, and an invented label looks exactly
like a judged one in labels.jsonl. So an answer parses only if:

- `<evidence>` and `</evidence>` occur exactly once each in the whole answer,
  open before close, and the inner text, trimmed of surrounding whitespace,
  is exactly `yes` or `no` (lower case; `Yes` is not a value).
- The think block is optional. Judges that are not grammar-constrained
  (the OpenAI API has no grammar field) may answer with the tag alone, and
  reasoning models served by vLLM move their reasoning out of `content`;
  the label comes from `<evidence>` only, so a missing think block invents
  nothing. When a think tag does occur, the block must be well formed, with
  the gate parser's rules: it runs from the first `<think>` to the LAST
  `</think>` before `<evidence>` (nested or repeated blocks end up inside
  it); a `</think>` before the first `<think>`, an unclosed block, or a
  think tag after the block is an error.

Text around and between the tags (prose, markdown fences) is allowed. Tags
are exact lower-case strings located with str.find/rfind/count over the whole
answer, never with a pattern that stops at its first match (that would
accept duplicates). Errors are grumem.gate_parser.ParseError: they name the
tag (`think` or `evidence`) and carry the answer, truncated.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from grumem.gate_parser import ParseError

_SHOW = 100  # characters of a bad value shown in the reason
EVIDENCE_VALUES = {"yes": True, "no": False}
TAGS = ("think", "evidence")


@dataclass(frozen=True)
class Judgement:
    """One parsed answer: `evidence` is the label; `think` is None when there was no block."""

    think: str | None
    evidence: bool

    def to_json(self) -> dict[str, str | bool | None]:
        return asdict(self)


def parse_judge_response(text: str) -> Judgement:
    """Parse a judge's answer strictly; raise ParseError naming the first failing tag."""
    think = _think_block(text)
    value = _evidence_text(text)
    if value not in EVIDENCE_VALUES:
        shown = repr(value[:_SHOW]) + ("..." if len(value) > _SHOW else "")
        raise ParseError("evidence", f"value {shown} is not yes or no", text)
    return Judgement(think, EVIDENCE_VALUES[value])


def _think_block(text: str) -> str | None:
    """The trimmed think text; None when the answer has no think tag at all."""
    if "<think>" not in text and "</think>" not in text:
        return None
    first_evidence = text.find("<evidence>")
    head = text if first_evidence < 0 else text[:first_evidence]
    start = head.find("<think>")
    if start < 0:
        raise ParseError("think", "think tag without a <think> before <evidence>", text)
    if 0 <= head.find("</think>") < start:
        raise ParseError("think", "</think> before the first <think>", text)
    close = head.rfind("</think>")
    if close < start:
        where = " before <evidence>" if first_evidence >= 0 else ""
        raise ParseError("think", f"<think> is not closed{where}", text)
    end = close + len("</think>")
    rest = text[end:]
    if "<think>" in rest or "</think>" in rest:
        where = "before <evidence>" if "<think>" in head[end:] else "after <evidence>"
        raise ParseError("think", f"think tag after the think block ({where})", text)
    return text[start + len("<think>") : close].strip()


def _evidence_text(text: str) -> str:
    """The trimmed inner text of the one `<evidence>...</evidence>`.

    It follows the think block by construction: the block is looked for only
    before the first `<evidence>`, and any think tag after it is an error."""
    open_tag, close_tag = "<evidence>", "</evidence>"
    n_open, n_close = text.count(open_tag), text.count(close_tag)
    if n_open == 0 and n_close == 0:
        raise ParseError("evidence", "missing <evidence>", text)
    for tag, n in ((open_tag, n_open), (close_tag, n_close)):
        if n > 1:
            raise ParseError("evidence", f"duplicate {tag}: found {n}, exactly one allowed", text)
    if n_open == 0:
        raise ParseError("evidence", f"{close_tag} without {open_tag}", text)
    if n_close == 0:
        raise ParseError("evidence", f"{open_tag} is never closed", text)
    start, close = text.find(open_tag), text.find(close_tag)
    if close < start:
        raise ParseError("evidence", f"{close_tag} before {open_tag}", text)
    return text[start + len(open_tag) : close].strip()
