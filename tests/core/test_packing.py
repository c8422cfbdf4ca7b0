"""grumem.core.packing: lossless splits, every chunk within budget, greedy packing, determinism."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.chunk_text import render_record, render_records
from grumem.core.packing import chunk_session, plan_session, split_text
from grumem.errors import ChunkBudgetError
from grumem.io.jsonl import validate
from grumem.io.tokenizer import cl100k_tokens

TOKENS = cl100k_tokens()

ROLES = ("user", "assistant", "tool_result", "system")

# Text that stresses the tokenizer at cut points: newlines and blank lines, runs of
# spaces and punctuation (which absorb following newlines), digits, non-ASCII, emoji.
_ATOMS = st.sampled_from(
    [
        "\n",
        "\n\n",
        " ",
        "    ",
        "=",
        "==",
        ".",
        "[",
        "]",
        "{",
        "}",
        "\t",
        "0",
        "12345",
        "é",
        "ß",
        "日本",
        "😀",
        "\r\n",
        "x",
        "the",
        "Word",
    ]
)
tricky_text = st.lists(_ATOMS, max_size=300).map("".join)
_base = st.one_of(st.text(min_size=1, max_size=200), tricky_text)
# Long texts (many budgets' worth) from a small draw: repeated fragments give long lines
# and long runs; joined fragments give many lines of varied length.
any_text = st.one_of(
    st.text(max_size=300),
    st.tuples(_base, st.integers(min_value=1, max_value=80)).map(lambda p: p[0] * p[1]),
    st.lists(_base, max_size=40).map("\n".join),
)
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rendered_tokens(role: str, text: str) -> int:
    return TOKENS.count(render_record(role, text))


# ------------------------------------------------------------------ splitting


@PROPERTY
@given(text=any_text, budget=st.integers(min_value=50, max_value=400), role=st.sampled_from(ROLES))
def test_split_is_lossless_and_every_part_fits(text: str, budget: int, role: str) -> None:
    parts = split_text(role, text, budget, TOKENS)
    assert "".join(parts) == text
    assert all(rendered_tokens(role, p) <= budget for p in parts)
    if rendered_tokens(role, text) <= budget:
        assert parts == [text]
    else:
        assert len(parts) >= 2 and all(parts)


def test_split_cuts_at_line_ends_when_lines_fit() -> None:
    text = "".join(f"line {i}: value={i * 7919 % 1000}\n" for i in range(400))
    parts = split_text("tool_result", text, 60, TOKENS)
    assert len(parts) > 10
    assert "".join(parts) == text
    assert all(p.endswith("\n") for p in parts)  # no line was cut
    # greedy: the next whole line would not have fitted
    for part, nxt in zip(parts, parts[1:], strict=False):
        first_line = nxt.split("\n", 1)[0] + "\n"
        assert rendered_tokens("tool_result", part + first_line) > 60


def test_split_cuts_inside_a_line_only_when_it_alone_is_too_long() -> None:
    long_line = " ".join(f"w{i}" for i in range(600))  # about 1200 tokens, no newline
    text = "short one\n" + long_line + "\nshort two\n"
    parts = split_text("assistant", text, 100, TOKENS)
    assert "".join(parts) == text
    assert all(rendered_tokens("assistant", p) <= 100 for p in parts)
    assert parts[0].startswith("short one\n")
    # cuts fall inside the long line only, never inside a short line
    inside = [p for p in parts if "\n" not in p]
    assert len(inside) >= 8
    assert parts[-1].endswith("\nshort two\n")


def test_a_split_record_marks_its_parts_and_keeps_its_fields() -> None:
    rec = {"role": "tool_result", "text": "x = 1\n" * 300, "source": {"file": "f", "line": 3}}
    parts = list(plan_session("s", [rec], 80, TOKENS).pieces)
    assert [p["part"] for p in parts] == [{"index": i, "of": len(parts)} for i in range(len(parts))]
    assert all(p["source"] == rec["source"] and p["role"] == "tool_result" for p in parts)
    assert list(parts[0]) == ["role", "text", "source", "part"]
    assert "".join(p["text"] for p in parts) == rec["text"]
    assert list(plan_session("s", [{"role": "user", "text": "hi"}], 80, TOKENS).pieces) == [
        {"role": "user", "text": "hi"}
    ]


def test_budget_too_small_is_an_error() -> None:
    with pytest.raises(ChunkBudgetError, match="too small"):
        split_text("tool_result", "a long text " * 50, 3, TOKENS)


# ------------------------------------------------------------------ packing

record_st = st.builds(
    lambda role, text: {"role": role, "text": text},
    st.sampled_from(ROLES),
    st.one_of(tricky_text, st.text(max_size=300)),
)


def _reassemble(chunks: list[dict]) -> list[str]:
    """Record texts from chunk files, parts joined back."""
    texts: list[str] = []
    for chunk in chunks:
        for rec in chunk["records"]:
            part = rec.get("part")
            if part is not None and part["index"] > 0:
                texts[-1] += rec["text"]
            else:
                texts.append(rec["text"])
    return texts


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record_st, min_size=1, max_size=30),
    budget=st.integers(min_value=50, max_value=300),
)
def test_every_chunk_fits_nothing_is_lost_and_packing_is_greedy(
    records: list[dict], budget: int
) -> None:
    result = chunk_session("s-1", records, budget, TOKENS)
    chunks = result.chunks
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    for chunk, tokens in zip(chunks, result.chunk_tokens, strict=True):
        validate(chunk, "chunk")
        assert TOKENS.count(render_records(chunk["records"])) == tokens <= budget
    assert _reassemble(chunks) == [r["text"] for r in records]
    for chunk, nxt in zip(chunks, chunks[1:], strict=False):  # the next record did not fit
        assert TOKENS.count(render_records([*chunk["records"], nxt["records"][0]])) > budget


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record_st, min_size=1, max_size=25),
    budget=st.integers(min_value=60, max_value=300),
)
def test_fast_packing_equals_exact_packing(records: list[dict], budget: int) -> None:
    """The additive token sums give the same chunks as counting every candidate in full."""
    plan = plan_session("s", records, budget, TOKENS)
    assert packed(plan) == exact_packing(list(plan.pieces), budget)


def packed(plan) -> list[tuple[list[dict], int]]:
    """A plan's chunks as (records, rendered tokens)."""
    return [(c["records"], t) for c, t in zip(plan.chunks(), plan.chunk_tokens, strict=True)]


def exact_packing(records: list[dict], budget: int) -> list[tuple[list[dict], int]]:
    """Greedy packing that counts every candidate chunk in full: the next record joins
    the chunk unless the chunk with it rendered is over the budget."""
    chunks: list[list[dict]] = []
    for rec in records:
        if chunks and TOKENS.count(render_records([*chunks[-1], rec])) <= budget:
            chunks[-1].append(rec)
        else:
            chunks.append([rec])
    return [(c, TOKENS.count(render_records(c))) for c in chunks]


def test_separator_sensitive_record_ends() -> None:
    """Record ends that the blank-line separator re-tokenizes (spaces, punctuation runs
    longer than the tail the chunker inspects) still give exact, in-budget chunks."""
    ends = [" " * 300, "=" * 300, ".\n", "\n\n\n", "x" * 50, "😀", "\r", "  \t "]
    records = [
        {"role": ROLES[i % 4], "text": f"record {i} " + end} for i, end in enumerate(ends * 3)
    ]
    for budget in (60, 150, 400):
        for recs, tokens in packed(plan_session("s", records, budget, TOKENS)):
            assert TOKENS.count(render_records(recs)) == tokens <= budget


def test_chunking_is_deterministic() -> None:
    records = [
        {"role": ROLES[i % 4], "text": f"step {i}\n" + "output line\n" * (i * 13 % 90)}
        for i in range(60)
    ]
    a = chunk_session("s", records, 200, TOKENS)
    b = chunk_session("s", [dict(r) for r in records], 200, TOKENS)
    assert a == b and len(a.chunks) > 5 and a.split_records > 0
