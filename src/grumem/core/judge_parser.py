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
accept duplicates): the tag logic is grumem.core.tags, shared with the gate
parser. Errors are grumem.core.tags.ParseError: they name the tag (`think` or
`evidence`) and carry the answer, truncated.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from grumem.core.tags import enum_value, tag_text, think_block

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
    """Parse a judge's answer strictly; raise ParseError naming the first failing tag.

    `<evidence>` follows the think block by construction: the block is looked for only
    before the first `<evidence>`, and any think tag after it is an error."""
    think, _ = think_block(text, "evidence", required=False)
    value, _ = tag_text(text, "evidence")
    return Judgement(think, enum_value(text, "evidence", value, EVIDENCE_VALUES))
