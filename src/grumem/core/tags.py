"""The strict tag grammar both LLM-answer parsers share (gate_parser, judge_parser).

An answer is text with XML-like tags in it; a parser asks for:

- a think block anchored on a tag: from the first `<think>` to the LAST
  `</think>` before the first `<anchor>`, so nested or repeated think blocks
  end up inside it; a `</think>` before the first `<think>`, an unclosed
  block, or a think tag after the block is an error;
- a tag that occurs exactly once in the whole answer (open and close tag),
  open before close, and after a given position when order matters;
- an enumerated value: the trimmed inner text is exactly one of a few words
  (`yes`/`no`, `continue`/`end`), case included.

Tags are exact lower-case strings located with str.find/rfind/count over the
whole answer, never with a pattern that stops at its first match (that would
accept duplicates). Inner text is trimmed of surrounding whitespace and
otherwise kept verbatim. Every failure is a ParseError naming the tag; its
reason is written into gates records, the log and the corpus, so the wording
is part of the records (tests pin it byte for byte).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar, overload

from grumem.errors import ParseError

MAX_RAW = ParseError.MAX_RAW  # characters of the answer kept in a ParseError
_SHOW = 100  # characters of a bad value shown in the reason
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

V = TypeVar("V")


@overload
def think_block(text: str, anchor: str, *, required: Literal[True]) -> tuple[str, int]: ...
@overload
def think_block(text: str, anchor: str, *, required: bool) -> tuple[str | None, int]: ...
def think_block(text: str, anchor: str, *, required: bool) -> tuple[str | None, int]:
    """The trimmed think text before the first `<anchor>` and the index just past its
    `</think>`. Not `required` and no think tag anywhere: (None, 0)."""
    open_anchor = f"<{anchor}>"
    if not required and THINK_OPEN not in text and THINK_CLOSE not in text:
        return None, 0
    anchor_at = text.find(open_anchor)
    head = text if anchor_at < 0 else text[:anchor_at]
    # A required block is missing ("no <think>"); an optional one is only malformed when a
    # think tag occurs. The two parsers' wordings predate this module and are kept as they were.
    before = f"before the first {open_anchor}" if required else f"before {open_anchor}"
    start = head.find(THINK_OPEN)
    if start < 0:
        problem = "no <think>" if required else "think tag without a <think>"
        raise ParseError("think", f"{problem} {before}", text)
    if 0 <= head.find(THINK_CLOSE) < start:
        raise ParseError("think", "</think> before the first <think>", text)
    close = head.rfind(THINK_CLOSE)
    if close < start:
        where = f" {before}" if required or anchor_at >= 0 else ""
        raise ParseError("think", f"<think> is not closed{where}", text)
    end = close + len(THINK_CLOSE)
    rest = text[end:]
    if THINK_OPEN in rest or THINK_CLOSE in rest:
        side = "before" if THINK_OPEN in head[end:] else "after"
        raise ParseError("think", f"think tag after the think block ({side} {open_anchor})", text)
    return text[start + len(THINK_OPEN) : close].strip(), end


def tag_text(text: str, tag: str, *, after: tuple[int, str] | None = None) -> tuple[str, int]:
    """The trimmed inner text of the one `<tag>...</tag>` in `text` and the index just past
    its close tag. `after` = (position, what ends there): the tag must open at or past it."""
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
    if after is not None and start < after[0]:
        raise ParseError(tag, f"out of order: {open_tag} must come after {after[1]}", text)
    return text[start + len(open_tag) : close].strip(), close + len(close_tag)


def enum_value(text: str, tag: str, value: str, allowed: Mapping[str, V]) -> V:
    """What `value` (a tag's trimmed text in `text`) stands for; exactly a key of `allowed`."""
    if value not in allowed:
        shown = repr(value[:_SHOW]) + ("..." if len(value) > _SHOW else "")
        raise ParseError(tag, f"value {shown} is not {' or '.join(allowed)}", text)
    return allowed[value]
