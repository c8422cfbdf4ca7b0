"""A session's records packed into chunks whose rendered text fits the section budget.

Pure functions; tokens are cl100k counts (`grumem.tokens`) of the text exactly
as the prompt renders it (`grumem.chunk_files.render_records`).

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
  the record's last characters. Every packed chunk is then counted exactly
  once; should one ever disagree with its sum, the session is repacked
  counting every candidate chunk in full (slow, assumption-free).
- Splitting finds where the budget runs out from one tokenization of a
  window (token offsets), then steps back to a line end and checks the
  piece with an exact count, backing off only if that check fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from grumem.chunk_files import render_record, render_records
from grumem.errors import GrumemError
from grumem.tokens import count_tokens, encoding

SEPARATOR = "\n\n"  # between rendered records, as render_records joins them
TAIL_CHARS = 256  # end of a record whose tokens the separator can change
_NEWLINE = re.compile("\n")


class ChunkBudgetError(GrumemError, ValueError):
    pass


@dataclass(frozen=True)
class ChunkedSession:
    chunks: list[dict]  # chunk records (workflow/schemas/chunk.schema.yaml)
    chunk_tokens: list[int]  # rendered tokens of each chunk
    records: int  # records in
    split_records: int  # records that had to be split
    parts: int  # parts those records became

    @property
    def tokens(self) -> int:
        return sum(self.chunk_tokens)


def chunk_session(session: str, records: Sequence[dict], budget: int) -> ChunkedSession:
    """Split over-budget records, pack everything into chunks, index them from 0."""
    pieces: list[dict] = []
    alone: list[int] = []
    split_records = parts = 0
    counts = count_many([render_record(r["role"], r["text"]) for r in records])
    for rec, n in zip(records, counts, strict=True):
        if n <= budget:
            pieces.append(rec)
            alone.append(n)
            continue
        split = _parts(rec, _pieces(rec["role"], rec["text"], budget))
        split_records += 1
        parts += len(split)
        pieces.extend(split)
        alone.extend(count_many([render_record(p["role"], p["text"]) for p in split]))
    packed = pack_records(pieces, budget, alone)
    chunks = [
        {"session": session, "index": i, "records": recs} for i, (recs, _) in enumerate(packed)
    ]
    return ChunkedSession(chunks, [t for _, t in packed], len(records), split_records, parts)


def split_record(record: dict, budget: int) -> list[dict]:
    """[record] if it fits alone, else its parts (same fields, text split, `part` added)."""
    return _parts(record, split_text(record["role"], record["text"], budget))


def _parts(record: dict, texts: list[str]) -> list[dict]:
    if len(texts) == 1:
        return [record]
    return [
        {**record, "text": t, "part": {"index": i, "of": len(texts)}} for i, t in enumerate(texts)
    ]


def split_text(role: str, text: str, budget: int) -> list[str]:
    """Consecutive pieces of `text`, each fitting the budget when rendered as a `role` record;
    cut at line ends, inside a line only when one line alone does not fit."""
    if count_tokens(render_record(role, text)) <= budget:
        return [text]
    return _pieces(role, text, budget)


def _pieces(role: str, text: str, budget: int) -> list[str]:
    """split_text for a text known not to fit whole."""
    label = render_record(role, "")
    pieces: list[str] = []
    pos = 0
    window = 4 * budget  # characters tokenized to find a cut; adapts to the text
    while pos < len(text):
        end, window = _cut(text, pos, label, budget, window)
        if end == pos:
            raise ChunkBudgetError(
                f"budget {budget} tokens is too small to hold even one character "
                f"of a {role} record with its label"
            )
        pieces.append(text[pos:end])
        pos = end
    return pieces


def _cut(text: str, pos: int, label: str, budget: int, window: int) -> tuple[int, int]:
    """Where the piece starting at `pos` ends: after the most whole lines that fit, else
    (one line alone too long) after the most characters that fit; `pos` if none fits.
    Also the window size to start from for the next piece."""
    limit, window = _budget_end(text, pos, label, budget, window)
    if limit == len(text):
        return limit, window

    def fits(end: int) -> bool:
        return count_tokens(label + text[pos:end]) <= budget

    line_ends = [m.end() for m in _NEWLINE.finditer(text, pos, limit)]
    if line_ends:
        k = _down_from(len(line_ends), lambda k: fits(line_ends[k - 1]))
        if k:
            return line_ends[k - 1], window
        limit = line_ends[0] - 1  # the first line alone is too long: cut inside it
    return pos + _down_from(limit - pos, lambda n: fits(pos + n)), window


def _budget_end(text: str, pos: int, label: str, budget: int, window: int) -> tuple[int, int]:
    """End of the longest piece from `pos` whose tokens, in the tokenization of a longer
    window, number at most `budget` with the label: a close, usually exact, guess of the
    cut; len(text) when the rest of the text fits (that one is exact). Also a window
    size that fits a piece like this one with some room."""
    enc = encoding()
    while True:
        end = min(len(text), pos + window)
        tokens = enc.encode_ordinary(label + text[pos:end])
        if len(tokens) > budget:
            break
        if end == len(text):
            return end, window
        window *= 2
    # characters wholly inside tokens[:budget]: a character split with the next token
    # is incomplete in these bytes and dropped by the lenient decode
    chars = len(enc.decode_bytes(tokens[:budget]).decode("utf-8", errors="ignore"))
    piece = max(0, chars - len(label))
    return pos + piece, max(window // 2, piece + piece // 4 + 64)


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


def pack_records(
    records: Sequence[dict], budget: int, alone: Sequence[int] | None = None
) -> list[tuple[list[dict], int]]:
    """Greedy packing of records (each fitting alone) into (records, rendered tokens) chunks.

    `alone` are the records' rendered token counts when already known."""
    rendered = [render_record(r["role"], r["text"]) for r in records]
    if alone is None:
        alone = count_many(rendered)
    joined = _joined_counts(rendered, alone)
    packed: list[tuple[list[dict], int]] = []
    current: list[dict] = []
    acc = last = 0  # acc: sum of `joined` over current; last: index of its last record
    for i, rec in enumerate(records):
        if alone[i] > budget:
            raise ChunkBudgetError(
                f"record of {alone[i]} tokens is over the budget of {budget}; split it first"
            )
        if current and acc + alone[i] > budget:
            packed.append((current, acc - joined[last] + alone[last]))
            current, acc = [], 0
        current.append(rec)
        acc += joined[i]
        last = i
    if current:
        packed.append((current, acc - joined[last] + alone[last]))
    exact = count_many([render_records(recs) for recs, _ in packed])
    if all(n == tokens for n, (_, tokens) in zip(exact, packed, strict=True)):
        return packed
    return _pack_exact(records, budget)


def _joined_counts(rendered: list[str], alone: Sequence[int]) -> list[int]:
    """count(r + SEPARATOR) for each rendered record: its own count plus what the separator
    changes, which is decided by the record's last characters."""
    tails = [r[-TAIL_CHARS:] for r in rendered]
    with_sep = count_many([t + SEPARATOR for t in tails])
    without = count_many(tails)
    return [a + w - t for a, w, t in zip(alone, with_sep, without, strict=True)]


def _pack_exact(records: Sequence[dict], budget: int) -> list[tuple[list[dict], int]]:
    """Greedy packing counting every candidate chunk in full: the slow, assumption-free path."""
    packed: list[tuple[list[dict], int]] = []
    current: list[dict] = []
    tokens = 0
    for rec in records:
        candidate = count_tokens(render_records([*current, rec]))
        if current and candidate > budget:
            packed.append((current, tokens))
            current, candidate = [], count_tokens(render_records([rec]))
        current.append(rec)
        tokens = candidate
    if current:
        packed.append((current, tokens))
    return packed


def count_many(texts: Sequence[str]) -> list[int]:
    # tiktoken's batch API runs threads, but the encoder holds the GIL: measured no faster
    return [count_tokens(t) for t in texts]
