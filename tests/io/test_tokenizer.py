"""grumem.io.tokenizer: cl100k offline, and nothing written outside the run's own files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.tokens import MAX_TOKEN_BYTES
from grumem.io.tokenizer import cl100k, cl100k_tokens
from support.token_texts import TEXTS

TOKENS = cl100k_tokens()


def test_counts_are_cl100k() -> None:
    # known cl100k_base counts
    assert TOKENS.count("hello world") == 2
    assert TOKENS.count("<|endoftext|>") == 7  # special-token text counts as plain text
    assert cl100k().encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


def test_loading_the_encoding_leaves_nothing_in_the_temp_dir(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
    }
    env["TMPDIR"] = str(tmp_path)
    code = (
        "from grumem.io.tokenizer import cl100k_tokens; print(cl100k_tokens().count('hello world'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"
    assert list(tmp_path.iterdir()) == []


def test_the_cached_encoding_is_the_registry_s(tmp_path: Path) -> None:
    """grumem.io.startup_cache keeps the constructor's arguments: the encoding made from
    the cache, and the one made the first time, are tiktoken's own."""
    code = (
        "import tiktoken; from grumem.io.tokenizer import cl100k, ENCODING_NAME\n"
        "mine, ref = cl100k(), tiktoken.get_encoding(ENCODING_NAME)\n"
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


def test_a_text_of_more_characters_than_the_longest_tokens_allow_is_over_uncounted() -> None:
    """MAX_TOKEN_BYTES bounds every token of the pinned ranks: a text longer than
    limit * it has more than `limit` tokens, whatever it holds."""
    assert max(len(b) for b in cl100k().token_byte_values()) == MAX_TOKEN_BYTES
    run = " " * MAX_TOKEN_BYTES  # one token
    assert TOKENS.count(run * 10) == 10
    assert TOKENS.count_at_most("", run * 10, 10) == 10
    assert TOKENS.count_at_most("", run * 10 + " ", 10) is None


_SPECIAL = st.sampled_from(["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>", "<|fim"])


@given(st.lists(TEXTS | _SPECIAL, max_size=6).map("".join))
@settings(max_examples=600, deadline=None)
def test_a_count_is_the_encoding_with_special_token_text_as_plain_text(text: str) -> None:
    """grumem.core.tokens counts by encode_ordinary: tiktoken's encode with no special
    token allowed or refused, token for token."""
    ids = cl100k().encode(text, disallowed_special=())
    assert cl100k().encode_ordinary(text) == ids
    assert TOKENS.count(text) == len(ids)
