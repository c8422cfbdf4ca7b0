"""Token counting: cl100k offline, and nothing written outside the run's own files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.tokens import (
    MAX_TOKEN_BYTES,
    count_tokens,
    count_tokens_at_most,
    count_tokens_refilled,
    count_tokens_within,
    encoding,
    token_bound,
)


def test_counts_are_cl100k() -> None:
    # known cl100k_base counts
    assert count_tokens("hello world") == 2
    assert count_tokens("<|endoftext|>") == 7  # special-token text counts as plain text
    assert encoding().encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


def test_loading_the_encoding_leaves_nothing_in_the_temp_dir(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
    }
    env["TMPDIR"] = str(tmp_path)
    code = "from grumem.core.tokens import count_tokens; print(count_tokens('hello world'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"
    assert list(tmp_path.iterdir()) == []


# pieces that meet cl100k's pre-tokenizer at its edges: newlines and CR runs,
# spaces and tabs, contractions, digits, punctuation, letters of other scripts
_PIECES = st.sampled_from(
    [
        "\n",
        "\n\n",
        "\r\n",
        " ",
        "  ",
        "\t",
        "\u00a0",
        "\u2028",
        "'s",
        "'",
        "a",
        "The",
        "<",
        ">",
        "</update>",
        "x1",
        "123",
        "1234",
        "!",
        "?\n",
        "é",
        "日本",
        "🙂",
        "-",
        ".\n",
    ]
)
_TEXTS = st.lists(_PIECES | st.text(max_size=6), max_size=12).map("".join)


@given(_TEXTS, _TEXTS, _TEXTS, _TEXTS)
@settings(max_examples=600, deadline=None)
def test_count_tokens_refilled_equals_the_direct_count(
    prefix: str, known: str, middle: str, suffix: str
) -> None:
    """The responses stage's budget count: from the count with another
    memory in the slot, only the slot recounted, it is the direct count, exactly."""
    known_count = count_tokens(prefix + known + suffix)
    assert count_tokens_refilled(prefix, suffix, known, known_count, middle) == count_tokens(
        prefix + middle + suffix
    )


def test_count_tokens_refilled_on_the_template_equals_the_direct_count() -> None:
    template = (Path(__file__).parents[2] / "templates" / "gru-mem.txt").read_text(encoding="utf-8")
    head, tail = template.split("{memory}")
    known = "No previous memory"
    known_count = count_tokens(head + known + tail)
    for memory in [known, "The bus left at 9.\nIt was red.", "\n x", "", "x\n"]:
        refilled = count_tokens_refilled(head, tail, known, known_count, memory)
        assert refilled == count_tokens(head + memory + tail)


@given(_TEXTS)
@settings(max_examples=600, deadline=None)
def test_token_bound_is_never_below_the_count(text: str) -> None:
    """Budget checks that pass on the bound skip the encoder: it must bound."""
    assert token_bound(text) >= count_tokens(text)


def test_the_cached_encoding_is_the_registry_s(tmp_path: Path) -> None:
    """grumem.io.startup_cache keeps the constructor's arguments: the encoding
    made from the cache, and the one made the first time, are tiktoken's own."""
    code = (
        "import tiktoken; from grumem.core.tokens import encoding, ENCODING_NAME\n"
        "mine, ref = encoding(), tiktoken.get_encoding(ENCODING_NAME)\n"
        "assert mine._pat_str == ref._pat_str and mine._special_tokens == ref._special_tokens\n"
        "assert mine._mergeable_ranks == ref._mergeable_ranks and mine.n_vocab == ref.n_vocab\n"
        "text = 'Hello wörld 123 <|endoftext|>\\n\\n  x'\n"
        "kw = {'disallowed_special': ()}\n"
        "assert mine.encode(text, **kw) == ref.encode(text, **kw)\n"
    )
    env = dict(os.environ, GRUMEM_CACHE_DIR=str(tmp_path / "cache"), TIKTOKEN_CACHE_DIR="")
    for _ in ("made", "read from the cache"):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    assert len(list((tmp_path / "cache" / "data").iterdir())) == 1


@given(_TEXTS, _TEXTS, _TEXTS)
@settings(max_examples=600, deadline=None)
def test_count_tokens_within_equals_the_direct_counts(
    prefix: str, middle: str, suffix: str
) -> None:
    """The prompts stage counts a section and its prompt sharing the section's inner
    part: both counts are the direct ones, exactly."""
    assert count_tokens_within(prefix, middle, suffix) == (
        count_tokens(middle),
        count_tokens(prefix + middle + suffix),
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
        assert count_tokens_within(head, section, tail) == (
            count_tokens(section),
            count_tokens(head + section + tail),
        )


@given(
    st.sampled_from(["", "[ToolResult] ", "[User] "]),
    st.lists(_TEXTS, max_size=8).map("".join),
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
    n = count_tokens(prefix + text)
    assert count_tokens_at_most(prefix, text, limit, window) == (n if n <= limit else None)


def test_a_text_of_more_characters_than_the_longest_tokens_allow_is_over_uncounted() -> None:
    """MAX_TOKEN_BYTES bounds every token of the pinned ranks: a text longer than
    limit * it has more than `limit` tokens, whatever it holds."""
    assert max(len(b) for b in encoding().token_byte_values()) == MAX_TOKEN_BYTES
    run = " " * MAX_TOKEN_BYTES  # one token
    assert count_tokens(run * 10) == 10
    assert count_tokens_at_most("", run * 10, 10) == 10
    assert count_tokens_at_most("", run * 10 + " ", 10) is None
