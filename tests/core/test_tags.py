"""grumem.core.tags, the strict tag grammar both parsers share: property tests of each function
against an independent oracle that tokenises every tag with a regex, so a function that
stops at its first match, defaults, or trims too much is caught on generated text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.core.tags import MAX_RAW, enum_value, tag_text, think_block
from grumem.errors import GrumemError, ParseError

# Pieces generated text is built from: the tags under test, other tags, near-tags that are
# not tags, and every kind of whitespace str.strip() removes.
TAGS = ["<think>", "</think>", "<x>", "</x>", "<a>", "</a>"]
PLAIN = ["w", "yes", "no", " ", "\n", "\t", "\r\n", "\xa0", "\u2028", "é", "😀"]
NEAR = ["<", ">", "/", "<X>", "< x>", "<x >", "</ x>", "<thinking>", "<b>", "think"]

plain = st.lists(st.sampled_from(PLAIN + NEAR), max_size=5).map("".join)
any_text = st.lists(st.sampled_from(PLAIN + NEAR + TAGS), max_size=12).map("".join)


def without(*tags: str) -> st.SearchStrategy[str]:
    """Text with none of `tags` in it (a near-tag next to a piece can form a tag)."""
    return any_text.filter(lambda s: not any(t in s for t in tags))


def _trimmed(text: str) -> str:
    return re.fullmatch(r"\s*(.*?)\s*", text, re.DOTALL).group(1)


def parse_error(fn, *args, **kwargs) -> ParseError:
    with pytest.raises(ParseError) as info:
        fn(*args, **kwargs)
    return info.value


# --- ParseError ---------------------------------------------------------------------------


@given(st.text(max_size=MAX_RAW + 50) | st.integers(0, 3 * MAX_RAW).map("y".__mul__))
def test_parse_error_keeps_the_answer_truncated(text: str):
    e = ParseError("x", "a reason", text)
    assert isinstance(e, GrumemError)
    assert str(e) == "<x>: a reason"
    assert e.to_json() == {"tag": "x", "reason": "a reason", "raw": e.raw}
    if len(text) <= MAX_RAW:
        assert e.raw == text
    else:
        assert e.raw == f"{text[:MAX_RAW]}...[truncated: {len(text)} characters in all]"


# --- tag_text: exactly one <x>...</x> -----------------------------------------------------


def tag_oracle(text: str, tag: str) -> tuple[str, int] | None:
    """The one block's trimmed text and end, or None: any other count or order is malformed."""
    tokens = list(re.finditer(rf"</?{tag}>", text))
    if [m.group() for m in tokens] != [f"<{tag}>", f"</{tag}>"]:
        return None
    return _trimmed(text[tokens[0].end() : tokens[1].start()]), tokens[1].end()


@given(without("<x>", "</x>"), without("<x>", "</x>"), without("<x>", "</x>"))
def test_tag_text_takes_the_one_block_verbatim_but_trimmed(before: str, inner: str, after: str):
    text = f"{before}<x>{inner}</x>{after}"
    got = tag_text(text, "x")
    assert got == (_trimmed(inner), len(before) + len(f"<x>{inner}</x>"))
    assert got[0] == inner.strip()  # trimming is str.strip's, nothing more


@given(any_text)
def test_tag_text_agrees_with_the_oracle(text: str):
    expected = tag_oracle(text, "x")
    if expected is not None:
        assert tag_text(text, "x") == expected
        return
    e = parse_error(tag_text, text, "x")
    assert e.tag == "x" and e.raw == text
    n_open, n_close = text.count("<x>"), text.count("</x>")
    if n_open == n_close == 0:
        assert e.reason == "missing <x>"
    elif n_open > 1:
        assert e.reason == f"duplicate <x>: found {n_open}, exactly one allowed"
    elif n_close > 1:
        assert e.reason == f"duplicate </x>: found {n_close}, exactly one allowed"
    elif n_open == 0:
        assert e.reason == "</x> without <x>"
    elif n_close == 0:
        assert e.reason == "<x> is never closed"
    else:
        assert e.reason == "</x> before <x>"


@given(without("<x>", "</x>"), without("<x>", "</x>"), st.integers(-3, 3))
def test_tag_text_after_a_position(before: str, inner: str, offset: int):
    text = f"{before}<x>{inner}</x>"
    pos = max(0, len(before) + offset)  # around the open tag, where an off-by-one shows
    if len(before) >= pos:
        assert tag_text(text, "x", after=(pos, "</a>")) == tag_text(text, "x")
    else:
        e = parse_error(tag_text, text, "x", after=(pos, "</a>"))
        assert (e.tag, e.reason) == ("x", "out of order: <x> must come after </a>")


# --- think_block: anchored on the first <a> -----------------------------------------------


def think_oracle(text: str, required: bool) -> tuple[str | None, int] | None:
    """The block from the tokens: the think tags before the first <a> must open with <think>
    and end with </think>, and no think tag may follow that </think> anywhere."""
    tokens = list(re.finditer(r"</?think>", text))
    if not tokens and not required:
        return None, 0
    anchor = text.find("<a>")
    head = [m for m in tokens if anchor < 0 or m.start() < anchor]
    if not head or head[0].group() != "<think>" or head[-1].group() != "</think>":
        return None
    if head[-1] is not tokens[-1]:
        return None
    return _trimmed(text[head[0].end() : head[-1].start()]), head[-1].end()


@pytest.mark.parametrize("required", [True, False])
@given(text=any_text)
def test_think_block_agrees_with_the_oracle(text: str, required: bool):
    expected = think_oracle(text, required)
    if expected is not None:
        assert think_block(text, "a", required=required) == expected
    else:
        e = parse_error(think_block, text, "a", required=required)
        assert e.tag == "think" and e.raw == text and "\n" not in str(e)


@pytest.mark.parametrize("required", [True, False])
@given(
    before=without("<think>", "</think>", "<a>"),
    inner=without("<a>"),
    between=without("<think>", "</think>", "<a>"),
    rest=without("<think>", "</think>"),
)
def test_think_block_runs_to_the_last_close_before_the_anchor(
    before: str, inner: str, between: str, rest: str, required: bool
):
    """Nested and repeated think blocks end up inside the block, kept verbatim."""
    text = f"{before}<think>{inner}</think>{between}<a>{rest}"
    end = len(f"{before}<think>{inner}</think>")
    assert think_block(text, "a", required=required) == (inner.strip(), end)


@given(without("<think>", "</think>"))
def test_no_think_tag_is_none_when_optional_and_an_error_when_required(text: str):
    assert think_block(text, "a", required=False) == (None, 0)
    e = parse_error(think_block, text, "a", required=True)
    assert (e.tag, e.reason) == ("think", "no <think> before the first <a>")


# --- enum_value ---------------------------------------------------------------------------

ALLOWED = {"continue": False, "end": True}


@given(
    st.sampled_from([*ALLOWED, "End", "end.", "", "stop"])
    | st.text(max_size=300)
    | st.integers(98, 102).map("v".__mul__)  # around the 100 characters shown
)
def test_enum_value_is_exactly_a_key(value: str):
    if value in ALLOWED:
        assert enum_value("raw", "x", value, ALLOWED) is ALLOWED[value]
        return
    e = parse_error(enum_value, "raw", "x", value, ALLOWED)
    shown = repr(value[:100]) + ("..." if len(value) > 100 else "")
    assert (e.tag, e.reason, e.raw) == ("x", f"value {shown} is not continue or end", "raw")
    assert "\n" not in str(e)  # repr escapes newlines: the reason stays one line
