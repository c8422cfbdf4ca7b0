"""Texts for property tests of token counts: pieces that meet cl100k's pre-tokenizer at
its edges (newlines and CR runs, spaces and tabs, contractions, digits, punctuation,
letters of other scripts, special-token text), joined with arbitrary text."""

from __future__ import annotations

from hypothesis import strategies as st

PIECES = st.sampled_from(
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
TEXTS = st.lists(PIECES | st.text(max_size=6), max_size=12).map("".join)
