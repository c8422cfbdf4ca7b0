"""Token counts (cl100k) of prompt text, exact, with as little encoding as the text allows.

Pure: the encoder is given (`Tokens(load)`: grumem.io.tokenizer loads tiktoken's
cl100k offline) and loaded at the first count that needs it. `token_bound` needs
none: a budget check that passes on it never loads the encoder, whose load is most
of a small job's start-up, and only a text near its limit is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol


class Encoder(Protocol):
    """What of a tiktoken Encoding the counts use."""

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes: ...


def token_bound(text: str) -> int:
    """An upper bound of a text's cl100k count without the encoder: its UTF-8 length.

    Every cl100k token is at least one byte, so a text within a budget in bytes is
    within it in tokens."""
    return len(text.encode("utf-8", "surrogatepass"))


# the longest cl100k token, in bytes (the ranks are pinned by grumem.io.tokenizer's
# RANKS_SHA256; a test checks this against them): a text of more UTF-8 bytes than
# limit * this, so of more characters, has more than `limit` tokens
MAX_TOKEN_BYTES = 128
# characters encoded at a time by count_at_most: the encoder's token list of a
# window, not of a whole long text, is what is held
COUNT_WINDOW = 1 << 16
# two entries a trajectory in flight (its memory, and the slot holding it): room for
# thousands, or the round robin of a large shard would evict each before its reuse
CACHED_TEXTS = 16384


class Tokens:
    """Counts of text by an encoder that `load` supplies at the first count.

    A job builds one and passes it down, so its cache (`count_cached`) and its encoder
    serve the whole job."""

    def __init__(self, load: Callable[[], Encoder]) -> None:
        self._load = load
        self._encoder: Encoder | None = None
        # count, for text that repeats (the system prompt, a memory kept across turns)
        self.count_cached = lru_cache(maxsize=CACHED_TEXTS)(self.count)

    @property
    def loaded(self) -> bool:
        """Whether the encoder was needed yet."""
        return self._encoder is not None

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = self._load()
        return self._encoder

    def count(self, text: str) -> int:
        """Number of tokens in `text`; special-token text counts as plain text."""
        return len(self.encoder.encode_ordinary(text))

    def count_at_most(
        self, prefix: str, text: str, limit: int, window: int = COUNT_WINDOW
    ) -> int | None:
        """count(prefix + text) if it is at most `limit`, else None.

        Neither the concatenation nor the tokens of a long text are made: a text longer
        than MAX_TOKEN_BYTES * limit characters is over without counting; another is
        counted `window` characters at a time, each window ending at a cut (where the
        tokens start afresh, so the windows' counts add up to the whole's), stopping
        once over."""
        if len(prefix) + len(text) > MAX_TOKEN_BYTES * limit:
            return None
        total, pos, head = 0, 0, prefix
        while True:
            end = _cut_from(text, pos + window)
            total += self.count(head + text[pos:end])
            if total > limit:
                return None
            if end == len(text):
                return total
            pos, head = end, ""

    def count_refilled(
        self, prefix: str, suffix: str, known: str, known_count: int, middle: str
    ) -> int:
        """count(prefix + middle + suffix), exactly, from
        known_count = count(prefix + known + suffix): only the slot between the cuts is
        counted (and cached), never the text around it, which a turn's section makes
        new at every turn."""
        if middle == known:
            return known_count
        p, q = _slot_cuts(prefix, suffix)
        head, tail = prefix[p:], suffix[:q]
        return (
            known_count
            - self.count_cached(head + known + tail)
            + self.count_cached(head + middle + tail)
        )

    def count_within(self, prefix: str, middle: str, suffix: str) -> tuple[int, int]:
        """(count(middle), count(prefix + middle + suffix)), exactly.

        cl100k's pre-tokenizer never lets a piece run from a newline into a following
        printable character: at such a cut the tokens start afresh, so a text counts as
        the sum of its parts between cuts. The part of `middle` between its first and
        last cut (a section's inner records) is encoded once for both counts, and the
        text of `prefix` before its last cut and of `suffix` after its first (the
        template's fixed text) once per job (cached)."""
        count, cached = self.count, self.count_cached
        p = _last_cut(prefix)
        q = _first_cut(suffix)
        q = len(suffix) if q is None else q
        around = (cached(prefix[:p]) if p else 0) + (cached(suffix[q:]) if q < len(suffix) else 0)
        i = _first_cut(middle)
        if i is None:
            return count(middle), around + count(prefix[p:] + middle + suffix[:q])
        j = _last_cut(middle)
        inner = count(middle[i:j]) if j > i else 0
        alone = count(middle[:i]) + inner + count(middle[j:])
        within = around + count(prefix[p:] + middle[:i]) + inner + count(middle[j:] + suffix[:q])
        return alone, within


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
