"""grumem.core.split: a session's split is a function of its id and the seed alone,
so it is the same on every machine and adding sessions moves no other; over many
sessions each split gets its fraction."""

from __future__ import annotations

import hashlib
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.split import SPLITS, Split, split_file, split_fraction
from grumem.errors import SplitError

session_ids = st.text(min_size=1, max_size=40)


@st.composite
def splits(draw: st.DrawFn) -> Split:
    """Fractions in hundredths that sum to 1, and a seed."""
    train = draw(st.integers(0, 100))
    val = draw(st.integers(0, 100 - train))
    return Split(train / 100, val / 100, (100 - train - val) / 100, draw(st.integers(0, 10**6)))


def test_the_hash_is_the_documented_one() -> None:
    """u is sha256("{seed}:{session}")'s first 8 bytes, big-endian, over 2**64; the
    values are fixed here so that no change of the code moves a session."""
    digest = hashlib.sha256(b"15:demo-04-git-rebase-conflict").digest()
    assert split_fraction(15, "demo-04-git-rebase-conflict") == int.from_bytes(
        digest[:8], "big"
    ) / (2**64)
    demo = Split(0.6, 0.2, 0.2, seed=15)
    assert demo.assign(
        [
            "demo-01-k8s-namespace",
            "demo-02-slugify-unicode",
            "demo-03-npm-peer-deps",
            "demo-04-git-rebase-conflict",
            "demo-05-ci-postgres",
        ]
    ) == {
        "demo-01-k8s-namespace": "train",
        "demo-02-slugify-unicode": "train",
        "demo-03-npm-peer-deps": "train",
        "demo-04-git-rebase-conflict": "test",
        "demo-05-ci-postgres": "val",
    }


@given(splits(), st.lists(session_ids, unique=True), st.lists(session_ids, unique=True))
def test_adding_sessions_moves_no_other(split: Split, before: list[str], added: list[str]) -> None:
    first = split.assign(before)
    again = split.assign(added + before + added)  # any order, more sessions
    assert {s: again[s] for s in before} == first


@given(splits(), session_ids)
def test_the_assignment_is_deterministic(split: Split, session: str) -> None:
    copy = Split(split.train, split.val, split.test, split.seed)
    assert split.of(session) == copy.of(session) == split.of(session)
    u = split_fraction(split.seed, session)
    assert 0 <= u < 1
    want = "train" if u < split.train else "val" if u < split.train + split.val else "test"
    assert split.of(session) == want


@given(splits())
@settings(max_examples=30, deadline=None)
def test_each_split_gets_its_fraction_in_the_limit(split: Split) -> None:
    """Over 4000 sessions each count is within 5 standard deviations of its fraction
    (a binomial count; a fraction of 0 or 1 gets none or all, exactly)."""
    n = 4000
    assigned = split.assign(f"session-{i}" for i in range(n))
    for name in SPLITS:
        p = getattr(split, name)
        count = sum(1 for s in assigned.values() if s == name)
        if p in (0, 1):
            assert count == p * n, (name, p, count)
        else:
            assert abs(count - p * n) <= 5 * math.sqrt(n * p * (1 - p)) + 1, (name, p, count)


def test_a_seed_changes_the_draw() -> None:
    ids = [f"s{i}" for i in range(200)]
    assert Split(seed=0).assign(ids) != Split(seed=1).assign(ids)


@pytest.mark.parametrize(
    ("fractions", "field", "why"),
    [
        ((0.8, 0.1, 0.2), None, "fractions train 0.8 + val 0.1 + test 0.2 sum to 1.1, not 1"),
        ((0.5, 0.1, 0.1), None, "sum to 0.7, not 1"),
        ((1.2, -0.1, -0.1), "train", "is 1.2: a fraction is between 0 and 1"),
        ((0.5, 0.6, -0.1), "test", "is -0.1: a fraction is between 0 and 1"),
    ],
)
def test_fractions_that_are_no_split_are_refused_naming_the_field(
    fractions: tuple[float, float, float], field: str | None, why: str
) -> None:
    with pytest.raises(SplitError, match=re.escape(why)) as e:
        Split(*fractions)
    assert e.value.field == field


def test_decimal_fractions_sum_to_one() -> None:
    assert 0.7 + 0.2 + 0.1 != 1  # in floats
    assert Split(0.7, 0.2, 0.1).of("s") in SPLITS


def test_a_splits_file_is_named_beside_the_file_of_every_row() -> None:
    assert split_file("sessions.parquet", "train") == "sessions-train.parquet"
    assert split_file("turns.parquet", "val") == "turns-val.parquet"
