"""A session's records packed into chunks whose rendered text fits the section budget.

Pure functions; tokens are cl100k counts (`grumem.core.tokens.Tokens`) of the text exactly
as the prompt renders it (`grumem.core.chunk_text.render_records`).

- A record whose own rendering is over budget is split first: at line ends,
  or inside a line only when that line alone is too long, into consecutive
  parts marked `part: {index, of}`. The parts' texts concatenate to the
  original text; each part, rendered as a record, fits.
- Records (and parts) are then packed greedily, in order: a chunk takes the
  next record as long as the rendered chunk stays within the budget.

Cost. The tokenizer is the expensive part (a few hundred KB/s on JSON-like
text), so each character is counted about twice, never once per candidate:
- Packing adds up per-record counts. Token counts are not additive in
  general, but they are across the record separator up to a correction that
  depends only on the end of the record before it: the blank line is followed
  by a role label starting with `[`, and cl100k's pre-tokenizer always starts
  a new piece at a `[` that follows a newline. The correction is counted on
  the record's last characters. Every packed chunk of several records is then
  counted exactly once (a chunk of one record is that record's count); should
  one ever disagree with its sum, the session is repacked counting every
  candidate chunk in full (slow, assumption-free).
- Splitting finds where the budget runs out from one tokenization of a
  window (token offsets), then steps back to a line end and checks the
  piece with an exact count, backing off only if that check fails; that
  count is the part's own, kept for packing.

Memory. A session's text is held once, as its records hold it; nothing of the
size of a long record is made beside it (a 40 MB message: no copy, no token
list of it). Whether a record fits is counted a window at a time, stopping once
over (`grumem.core.tokens.Tokens.count_at_most`); a split record keeps only where its
parts end, and a part's text is sliced from it when its chunk is made; packing
plans chunks as index ranges, and `plan_session(...).chunks()` makes them one
at a time, for a writer to stream.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, overload

from grumem.core.chunk_text import render_record, render_records
from grumem.core.tokens import Tokens
from grumem.errors import ChunkBudgetError

SEPARATOR = "\n\n"  # between rendered records, as render_records joins them
TAIL_CHARS = 256  # end of a record whose tokens the separator can change
_NEWLINE = re.compile("\n")

Bounds = list[tuple[int, int, int]]  # each chunk: (first piece, end piece, rendered tokens)


@dataclass(frozen=True)
class ChunkedSession:
    chunks: list[dict[str, Any]]  # chunk records (workflow/schemas/chunk.schema.yaml)
    chunk_tokens: list[int]  # rendered tokens of each chunk
    records: int  # records in
    split_records: int  # records that had to be split
    parts: int  # parts those records became

    @property
    def tokens(self) -> int:
        return sum(self.chunk_tokens)


class Pieces(Sequence[dict[str, Any]]):
    """A session's records with each split one standing as its parts, made when asked
    for: a part is its record's fields, a slice of its text, and `part: {index, of}`."""

    def __init__(self, records: Sequence[dict[str, Any]], ends: Mapping[int, Sequence[int]]):
        self._records = records
        self._ends = ends  # record index -> where each of its parts ends in its text
        sizes = (len(ends[j]) if j in ends else 1 for j in range(len(records)))
        self._firsts = list(accumulate(sizes, initial=0))  # piece index of each record

    def __len__(self) -> int:
        return self._firsts[-1]

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        j = bisect_right(self._firsts, i) - 1
        record = self._records[j]
        if j not in self._ends:
            return record
        ends, k = self._ends[j], i - self._firsts[j]
        text = record["text"][ends[k - 1] if k else 0 : ends[k]]
        return {**record, "text": text, "part": {"index": k, "of": len(ends)}}


@dataclass(frozen=True)
class PlannedSession:
    """A session's chunks planned, not made: `chunks()` makes them one at a time."""

    session: str
    pieces: Pieces
    bounds: Bounds
    records: int  # records in
    split_records: int  # records that had to be split
    parts: int  # parts those records became

    @property
    def chunk_tokens(self) -> list[int]:
        return [t for _, _, t in self.bounds]

    @property
    def tokens(self) -> int:
        return sum(t for _, _, t in self.bounds)

    def chunks(self) -> Iterator[dict[str, Any]]:
        """The chunk records (workflow/schemas/chunk.schema.yaml), indexed from 0."""
        for i, (first, end, _) in enumerate(self.bounds):
            yield {"session": self.session, "index": i, "records": self.pieces[first:end]}


def chunk_session(
    session: str, records: Sequence[dict[str, Any]], budget: int, tokens: Tokens
) -> ChunkedSession:
    """Split over-budget records, pack everything into chunks, index them from 0."""
    plan = plan_session(session, records, budget, tokens)
    return ChunkedSession(
        list(plan.chunks()), plan.chunk_tokens, plan.records, plan.split_records, plan.parts
    )


def plan_session(
    session: str, records: Sequence[dict[str, Any]], budget: int, tokens: Tokens
) -> PlannedSession:
    """chunk_session's chunks, planned: what each holds and its tokens, made by `chunks()`."""
    ends: dict[int, list[int]] = {}
    alone: list[int] = []
    split_records = parts = 0
    for j, rec in enumerate(records):
        label = render_record(rec["role"], "")
        n = tokens.count_at_most(label, rec["text"], budget)
        if n is not None:
            alone.append(n)
            continue
        cut_ends, counts = _cut_ends(rec["role"], rec["text"], budget, tokens)
        split_records += 1
        parts += len(cut_ends)
        if len(cut_ends) > 1:
            ends[j] = cut_ends
            alone.extend(counts)
        else:
            alone.append(counts[0])
    pieces = Pieces(records, ends)
    bounds = _plan(pieces, budget, alone, tokens)
    return PlannedSession(session, pieces, bounds, len(records), split_records, parts)


def split_text(role: str, text: str, budget: int, tokens: Tokens) -> list[str]:
    """Consecutive pieces of `text`, each fitting the budget when rendered as a `role` record;
    cut at line ends, inside a line only when one line alone does not fit."""
    if tokens.count_at_most(render_record(role, ""), text, budget) is not None:
        return [text]
    ends, _ = _cut_ends(role, text, budget, tokens)
    return [text[a:b] for a, b in zip([0, *ends], ends, strict=False)]


def _cut_ends(role: str, text: str, budget: int, tokens: Tokens) -> tuple[list[int], list[int]]:
    """Where each piece of a text known not to fit whole ends, and each piece's rendered
    tokens (split_text's pieces, as offsets)."""
    label = render_record(role, "")
    ends: list[int] = []
    counts: list[int] = []
    pos = 0
    window = 4 * budget  # characters tokenized to find a cut; adapts to the text
    while pos < len(text):
        end, n, window = _cut(text, pos, label, budget, window, tokens)
        if end == pos:
            raise ChunkBudgetError(
                f"budget {budget} tokens is too small to hold even one character "
                f"of a {role} record with its label"
            )
        ends.append(end)
        counts.append(n)
        pos = end
    return ends, counts


def _cut(
    text: str, pos: int, label: str, budget: int, window: int, tokens: Tokens
) -> tuple[int, int, int]:
    """Where the piece starting at `pos` ends: after the most whole lines that fit, else
    (one line alone too long) after the most characters that fit; `pos` if none fits.
    Also the piece's rendered tokens, and the window size to start from for the next."""
    limit, rest, window = _budget_end(text, pos, label, budget, window, tokens)
    if rest is not None:
        return limit, rest, window
    counted: dict[int, int] = {}

    def fits(end: int) -> bool:
        counted[end] = tokens.count(label + text[pos:end])
        return counted[end] <= budget

    line_ends = [m.end() for m in _NEWLINE.finditer(text, pos, limit)]
    if line_ends:
        k = _down_from(len(line_ends), lambda k: fits(line_ends[k - 1]))
        if k:
            return line_ends[k - 1], counted[line_ends[k - 1]], window
        limit = line_ends[0] - 1  # the first line alone is too long: cut inside it
    end = pos + _down_from(limit - pos, lambda n: fits(pos + n))
    return end, counted.get(end, 0), window


def _budget_end(
    text: str, pos: int, label: str, budget: int, window: int, tokens: Tokens
) -> tuple[int, int | None, int]:
    """End of the longest piece from `pos` whose tokens, in the tokenization of a longer
    window, number at most `budget` with the label: a close, usually exact, guess of the
    cut; len(text) when the rest of the text fits, with its tokens (that one is exact,
    else None). Also a window size that fits a piece like this one with some room."""
    enc = tokens.encoder
    while True:
        end = min(len(text), pos + window)
        ids = enc.encode_ordinary(label + text[pos:end])
        if len(ids) > budget:
            break
        if end == len(text):
            return end, len(ids), window
        window *= 2
    # characters wholly inside tokens[:budget]: a character split with the next token
    # is incomplete in these bytes and dropped by the lenient decode
    chars = len(enc.decode_bytes(ids[:budget]).decode("utf-8", errors="ignore"))
    piece = max(0, chars - len(label))
    return pos + piece, None, max(window // 2, piece + piece // 4 + 64)


def _down_from(guess: int, fits: Callable[[int], bool]) -> int:
    """The largest k <= guess with fits(k), galloping down from `guess`; 0 if none.

    Token counts of prefixes are not strictly monotone, so this finds a k that
    fits with k+1 not fitting (or k = guess); callers only use a k that was checked.
    """
    if guess < 1:
        return 0
    if fits(guess):
        return guess
    hi, step = guess, 1
    while True:
        probe = max(1, hi - step)
        if fits(probe):
            lo = probe
            break
        if probe == 1:
            return 0
        hi, step = probe, step * 2
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _plan(
    records: Sequence[dict[str, Any]], budget: int, alone: Sequence[int], tokens: Tokens
) -> Bounds:
    """Greedy packing of records (each fitting alone, `alone` their rendered token counts)
    into chunks, as (first, end, rendered tokens) index ranges."""
    bounds: Bounds = []
    first = acc = joined = 0  # acc: sum of _joined over the chunk; joined: its last record's
    for i, rec in enumerate(records):
        if alone[i] > budget:
            raise ChunkBudgetError(
                f"record of {alone[i]} tokens is over the budget of {budget}; split it first"
            )
        if i > first and acc + alone[i] > budget:
            bounds.append((first, i, acc - joined + alone[i - 1]))
            first, acc = i, 0
        joined = _joined(rec, alone[i], tokens)
        acc += joined
    if len(records) > first:
        bounds.append((first, len(records), acc - joined + alone[len(records) - 1]))
    # a chunk of one record is that record's count, exactly; the others are checked
    for a, b, n in bounds:
        if b - a > 1 and tokens.count(render_records(records[a:b])) != n:
            return _plan_exact(records, budget, tokens)
    return bounds


def _joined(record: dict[str, Any], alone: int, tokens: Tokens) -> int:
    """count(rendered record + SEPARATOR): its own count plus what the separator changes,
    which is decided by the record's last characters."""
    tail = render_record(record["role"], record["text"][-TAIL_CHARS:])[-TAIL_CHARS:]
    return alone + tokens.count(tail + SEPARATOR) - tokens.count(tail)


def _plan_exact(records: Sequence[dict[str, Any]], budget: int, tokens: Tokens) -> Bounds:
    """Greedy packing counting every candidate chunk in full: the slow, assumption-free path."""
    bounds: Bounds = []
    first = n = 0
    for i in range(len(records)):
        candidate = tokens.count(render_records(records[first : i + 1]))
        if i > first and candidate > budget:
            bounds.append((first, i, n))
            first, candidate = i, tokens.count(render_records(records[i : i + 1]))
        n = candidate
    if len(records) > first:
        bounds.append((first, len(records), n))
    return bounds
