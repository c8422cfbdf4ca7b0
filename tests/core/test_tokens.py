"""grumem.core.tokens: the counts that encode less than the whole text are the direct
counts, exactly; the encoder is loaded only when a count needs it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.tokens import CACHED_TEXTS, MAX_TOKEN_BYTES, Encoder, Tokens, token_bound
from grumem.io.tokenizer import cl100k, cl100k_tokens
from support.token_texts import TEXTS

TOKENS = cl100k_tokens()


@given(TEXTS, TEXTS, TEXTS, TEXTS)
@settings(max_examples=600, deadline=None)
def test_count_tokens_refilled_equals_the_direct_count(
    prefix: str, known: str, middle: str, suffix: str
) -> None:
    """The responses stage's budget count: from the count with another memory in the
    slot, only the slot recounted, it is the direct count, exactly."""
    known_count = TOKENS.count(prefix + known + suffix)
    assert TOKENS.count_refilled(prefix, suffix, known, known_count, middle) == TOKENS.count(
        prefix + middle + suffix
    )


def test_count_tokens_refilled_on_the_template_equals_the_direct_count() -> None:
    template = (Path(__file__).parents[2] / "templates" / "gru-mem.txt").read_text(encoding="utf-8")
    head, tail = template.split("{memory}")
    known = "No previous memory"
    known_count = TOKENS.count(head + known + tail)
    for memory in [known, "The bus left at 9.\nIt was red.", "\n x", "", "x\n"]:
        refilled = TOKENS.count_refilled(head, tail, known, known_count, memory)
        assert refilled == TOKENS.count(head + memory + tail)


@given(TEXTS)
@settings(max_examples=600, deadline=None)
def test_token_bound_is_never_below_the_count(text: str) -> None:
    """Budget checks that pass on the bound skip the encoder: it must bound."""
    assert token_bound(text) >= TOKENS.count(text)


@given(TEXTS, TEXTS, TEXTS)
@settings(max_examples=600, deadline=None)
def test_count_tokens_within_equals_the_direct_counts(
    prefix: str, middle: str, suffix: str
) -> None:
    """The prompts stage counts a section and its prompt sharing the section's inner
    part: both counts are the direct ones, exactly."""
    assert TOKENS.count_within(prefix, middle, suffix) == (
        TOKENS.count(middle),
        TOKENS.count(prefix + middle + suffix),
    )


def test_count_tokens_within_a_rendered_section_of_the_template() -> None:
    template = (Path(__file__).parents[2] / "templates" / "gru-mem.txt").read_text(encoding="utf-8")
    head, tail = template.split("{chunk}")
    sections = [
        "[User] one",
        "[User] run it\n\n[Assistant] ok\n\n[ToolResult] Error: x\n\n[User] and?",
        "[User] a\n\n[Assistant]  b\n\n\n[System]\n",
        "\n[User] x\n\n",
    ]
    for section in sections:
        assert TOKENS.count_within(head, section, tail) == (
            TOKENS.count(section),
            TOKENS.count(head + section + tail),
        )


@given(
    st.sampled_from(["", "[ToolResult] ", "[User] "]),
    st.lists(TEXTS, max_size=8).map("".join),
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=1, max_value=24),
)
@settings(max_examples=600, deadline=None)
def test_count_tokens_at_most_is_the_direct_count_or_over(
    prefix: str, text: str, limit: int, window: int
) -> None:
    """The chunk stage asks whether a record fits without encoding the whole of a long
    one: a window at a time, cut where the tokens start afresh. The windows' counts add
    up to the direct count, exactly, and over the limit is None."""
    n = TOKENS.count(prefix + text)
    assert TOKENS.count_at_most(prefix, text, limit, window) == (n if n <= limit else None)


def _refuse() -> Encoder:
    raise AssertionError("the encoder was loaded")


def test_the_encoder_is_loaded_by_the_first_count_that_needs_it_and_once() -> None:
    loads: list[int] = []

    def load() -> Encoder:
        loads.append(1)
        return cl100k()

    tokens = Tokens(load)
    assert not tokens.loaded
    # a text over MAX_TOKEN_BYTES * limit characters is over without a count
    assert tokens.count_at_most("", "x" * (MAX_TOKEN_BYTES * 2 + 1), 2) is None
    assert loads == [] and not tokens.loaded
    assert tokens.count("hello world") == 2
    assert tokens.count_cached("hello world") == 2
    assert tokens.count_within("a", "\nb", "c") == (2, 3)
    assert loads == [1] and tokens.loaded


def test_a_count_the_bound_decides_never_loads_the_encoder() -> None:
    tokens = Tokens(_refuse)
    assert tokens.count_at_most("[User] ", "y" * 10_000, 10) is None
    assert token_bound("hello world") == 11
    assert not tokens.loaded


def test_the_cache_keeps_the_last_16384_texts_of_its_counter() -> None:
    tokens = Tokens(cl100k)
    for i in range(CACHED_TEXTS + 1):
        tokens.count_cached(f"text {i}")
    info = tokens.count_cached.cache_info()
    assert (info.maxsize, info.currsize, info.hits) == (16384, 16384, 0)
    tokens.count_cached(f"text {CACHED_TEXTS}")  # the newest: a hit
    tokens.count_cached("text 0")  # the oldest, evicted: counted again
    info = tokens.count_cached.cache_info()
    assert (info.hits, info.misses) == (1, CACHED_TEXTS + 2)
    # each counter its own cache: a job's, not the process's
    assert Tokens(cl100k).count_cached.cache_info().currsize == 0
