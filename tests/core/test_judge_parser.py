"""The strict judge parser: well-formed answers, a table of malformed ones, and a mutation
property test against an independent oracle (never a label the oracle calls malformed)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.gate_parser import MAX_RAW
from grumem.core.grammar import JUDGE_GRAMMAR
from grumem.core.judge_parser import TAGS, Judgement, parse_judge_response
from grumem.errors import ParseError


def answer(think: str | None = "reason", evidence: str = "yes", sep: str = "\n") -> str:
    head = "" if think is None else f"<think>{think}</think>{sep}"
    return f"{head}<evidence>{evidence}</evidence>"


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_judge_response(text)
    return info.value


# --- well-formed -------------------------------------------------------------------------


def test_yes_and_no():
    assert parse_judge_response(answer()) == Judgement("reason", True)
    assert parse_judge_response(answer(evidence="no")) == Judgement("reason", False)
    assert parse_judge_response(answer()).to_json() == {"think": "reason", "evidence": True}


def test_the_grammar_shape_parses():
    # what the GBNF produces: "<think>" text "</think>\n<evidence>" yn "</evidence>"
    assert "</think>\\n<evidence>" in JUDGE_GRAMMAR
    got = parse_judge_response("<think>The chunk shows the fix.</think>\n<evidence>yes</evidence>")
    assert got == Judgement("The chunk shows the fix.", True)


def test_values_are_trimmed_and_text_around_tags_is_allowed():
    text = "Sure.\n```\n<think>\n  a\n  b \n</think>\n\n<evidence>\n no \t</evidence>\n```\nDone."
    assert parse_judge_response(text) == Judgement("a\n  b", False)


def test_think_is_optional():
    assert parse_judge_response("<evidence>yes</evidence>") == Judgement(None, True)
    assert parse_judge_response("I looked. <evidence> no </evidence>") == Judgement(None, False)


def test_nested_think_blocks_end_up_inside_the_block():
    got = parse_judge_response("<think>a<think>b</think>c</think><evidence>no</evidence>")
    assert got == Judgement("a<think>b</think>c", False)


def test_unicode_kept():
    got = parse_judge_response(answer(think="Zürich — naïve 😀"))
    assert got.think == "Zürich — naïve 😀"


# --- malformed: each names its tag --------------------------------------------------------

MALFORMED = {
    "empty": ("", "evidence", "missing <evidence>"),
    "prose only": ("Yes, it holds evidence.", "evidence", "missing <evidence>"),
    "no evidence after think": ("<think>x</think>", "evidence", "missing <evidence>"),
    "unclosed evidence": ("<evidence>yes", "evidence", "never closed"),
    "close without open": ("yes</evidence>", "evidence", "</evidence> without <evidence>"),
    "close before open": ("</evidence>yes<evidence>", "evidence", "</evidence> before"),
    "duplicate open": (
        "<evidence>yes</evidence><evidence>",
        "evidence",
        "duplicate <evidence>: found 2",
    ),
    "duplicate close": ("<evidence>yes</evidence></evidence>", "evidence", "duplicate </evidence>"),
    "two answers": (answer(None) + "\n" + answer(None, "no"), "evidence", "duplicate"),
    "two answers with think": (answer() + answer(evidence="no"), "think", "after the think"),
    "capital Yes": (answer(evidence="Yes"), "evidence", "'Yes' is not yes or no"),
    "maybe": (answer(evidence="maybe"), "evidence", "'maybe' is not yes or no"),
    "empty value": (answer(evidence=" "), "evidence", "'' is not yes or no"),
    "yes with a reason": (answer(evidence="yes, the error"), "evidence", "is not yes or no"),
    "true": (answer(evidence="true"), "evidence", "'true' is not yes or no"),
    "unclosed think": ("<think>x<evidence>yes</evidence>", "think", "not closed"),
    "think closed after evidence": (
        "<think>x<evidence>yes</evidence></think>",
        "think",
        "not closed before <evidence>",
    ),
    "close think first": ("</think><think>x</think><evidence>no</evidence>", "think", "before"),
    "close think only": ("x</think><evidence>no</evidence>", "think", "without a <think>"),
    "think after evidence": (
        "<evidence>no</evidence><think>x</think>",
        "think",
        "without a <think> before",
    ),
    "second think after evidence": (
        "<think>a</think><evidence>no</evidence><think>b</think>",
        "think",
        "after the think block (after <evidence>)",
    ),
    "think inside evidence": (
        "<think>a</think><evidence><think>b</think>no</evidence>",
        "think",
        "after the think block",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed(name: str):
    text, tag, reason = MALFORMED[name]
    e = parse_error(text)
    assert e.tag == tag, e
    assert reason in e.reason, e.reason
    assert str(e).startswith(f"<{tag}>: ")
    assert e.raw == text
    assert e.to_json() == {"tag": tag, "reason": e.reason, "raw": text}


def test_raw_is_truncated_and_long_values_are_cut():
    long = "x" * (MAX_RAW + 500)
    e = parse_error(answer(think=long, evidence=long))
    assert e.tag == "evidence"
    assert len(e.reason) < 200 and e.reason.count("x") == 100
    assert e.raw.startswith("<think>" + "x" * (MAX_RAW - 7))
    assert e.raw.endswith(
        f"[truncated: {len(answer(think=long, evidence=long))} characters in all]"
    )


# --- an independent oracle: tokenise every tag, match the whole tag sequence -------------

TAG_TOKEN = re.compile(r"</?(?:think|evidence)>")
SHAPE = re.compile(r"(?:<think>(?:</?think>)*</think>)?<evidence></evidence>")


def oracle(text: str) -> Judgement | None:
    """The expected parse, or None when the text is malformed."""
    tokens = list(TAG_TOKEN.finditer(text))
    if not SHAPE.fullmatch("".join(m.group() for m in tokens)):
        return None
    value = text[tokens[-2].end() : tokens[-1].start()].strip()
    if value not in ("yes", "no"):
        return None
    think = None if len(tokens) == 2 else text[tokens[0].end() : tokens[-3].start()].strip()
    return Judgement(think, value == "yes")


PLAIN = ["", " ", "\n", "yes", "no", "Yes", "x", "evidence", "<", ">", "/", "é"]
TAG_PIECES = ["<think>", "</think>", "<evidence>", "</evidence>", "<Evidence>", "<evidence >"]
VALUES = ["yes", "no", " yes ", "\nno\n", "Yes", "NO", "", "maybe", "yes no", "y"]


@st.composite
def mutated_answers(draw: st.DrawFn) -> str:
    think = draw(st.sampled_from([None, "reason", "", "a\nb", "the <b>error</b> was fixed"]))
    text = draw(st.sampled_from(["", "Sure. ", "```\n"])) + answer(
        think, draw(st.sampled_from(["yes", "no"])), draw(st.sampled_from(["\n", "", " \n "]))
    )
    for _ in range(draw(st.integers(0, 3))):
        op = draw(
            st.sampled_from(
                ["delete", "duplicate", "insert", "replace", "truncate", "value", "drop_tag"]
                + ["copy_block", "move_block"]
            )
        )
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        piece = draw(st.sampled_from(PLAIN + TAG_PIECES))
        tokens = list(TAG_TOKEN.finditer(text))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "insert":
            text = text[:i] + piece + text[i:]
        elif op == "replace":
            text = text[:i] + piece + text[j:]
        elif op == "truncate":
            text = text[:i]
        elif op == "value":
            value = draw(st.sampled_from(VALUES))
            text = re.sub(
                r"<evidence>.*?</evidence>",
                f"<evidence>{value}</evidence>",
                text,
                count=1,
                flags=re.S,
            )
        elif op == "drop_tag" and tokens:
            m = draw(st.sampled_from(tokens))
            text = text[: m.start()] + text[m.end() :]
        elif op in ("copy_block", "move_block"):
            tag = draw(st.sampled_from(TAGS))
            m = re.search(rf"<{tag}>.*?</{tag}>", text, re.S)
            if m:
                if op == "move_block":
                    text = text[: m.start()] + text[m.end() :]
                k = draw(st.integers(0, len(text)))
                text = text[:k] + m.group() + text[k:]
    return text


def test_no_defaults_property():
    """Every mutation is either a ParseError naming think or evidence, or exactly the
    oracle's parse: never a label the oracle calls malformed, never a different one."""
    outcomes: Counter[str] = Counter()

    @settings(
        max_examples=800,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(mutated_answers())
    def check(text: str) -> None:
        expected = oracle(text)
        try:
            got = parse_judge_response(text)
        except ParseError as e:
            assert expected is None, f"rejected a well-formed answer: {e}"
            assert e.tag in TAGS
            assert e.raw == text if len(text) <= MAX_RAW else e.raw.startswith(text[:MAX_RAW])
            outcomes["error"] += 1
        else:
            assert expected is not None, f"accepted a malformed answer as {got}"
            assert got == expected
            assert isinstance(got.evidence, bool)
            outcomes[f"parsed {got.evidence}"] += 1

    check()
    # the property means nothing if the mutations were all valid, or all broken
    assert outcomes["error"] >= 150, outcomes
    assert outcomes["parsed True"] >= 75 and outcomes["parsed False"] >= 75, outcomes


# --- every reason, byte for byte ----------------------------------------------------------
# The reason is what labels and the judge's records carry for a failed answer: a refactor
# of the tag logic must not change it.

EXACT_REASONS = {
    "think close only": (
        "x</think><evidence>no</evidence>",
        "think",
        "think tag without a <think> before <evidence>",
    ),
    "think close first": (
        "</think><think>x</think><evidence>no</evidence>",
        "think",
        "</think> before the first <think>",
    ),
    "unclosed think": (
        "<think>x<evidence>yes</evidence>",
        "think",
        "<think> is not closed before <evidence>",
    ),
    "unclosed think, no evidence": ("<think>x", "think", "<think> is not closed"),
    "think reopened before evidence": (
        "<think>a</think><think><evidence>yes</evidence>",
        "think",
        "think tag after the think block (before <evidence>)",
    ),
    "think after evidence": (
        "<think>a</think><evidence>no</evidence><think>b</think>",
        "think",
        "think tag after the think block (after <evidence>)",
    ),
    "missing": ("<think>x</think>", "evidence", "missing <evidence>"),
    "duplicate open": (
        "<evidence>yes</evidence><evidence>",
        "evidence",
        "duplicate <evidence>: found 2, exactly one allowed",
    ),
    "duplicate close": (
        "<evidence>yes</evidence></evidence>",
        "evidence",
        "duplicate </evidence>: found 2, exactly one allowed",
    ),
    "close only": ("yes</evidence>", "evidence", "</evidence> without <evidence>"),
    "unclosed": ("<evidence>yes", "evidence", "<evidence> is never closed"),
    "close first": ("</evidence>yes<evidence>", "evidence", "</evidence> before <evidence>"),
    "maybe": (answer(evidence="maybe"), "evidence", "value 'maybe' is not yes or no"),
    "long value": (
        answer(evidence="y" * 101),
        "evidence",
        f"value {'y' * 100!r}... is not yes or no",
    ),
}


@pytest.mark.parametrize("name", list(EXACT_REASONS))
def test_reasons_are_exact(name: str):
    text, tag, reason = EXACT_REASONS[name]
    e = parse_error(text)
    assert (e.tag, e.reason, str(e)) == (tag, reason, f"<{tag}>: {reason}")
