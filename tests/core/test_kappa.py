"""κ calibration (M5.2): Cohen's κ against a textbook value and an independent implementation."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from grumem.core.evidence import Labels
from grumem.core.kappa import Confusion, cohen_kappa, kappa_between
from grumem.errors import KappaError
from support.kappa import kappa_2x2


def kappa_lists(x: list[bool], y: list[bool]) -> float:
    """Independent: from the two raters' decision lists, in floats, per category."""
    n = len(x)
    po = sum(1 for i in range(n) if x[i] == y[i]) / n
    pe = sum((x.count(c) / n) * (y.count(c) / n) for c in (True, False))
    return (po - pe) / (1 - pe)


def test_textbook_example() -> None:
    # Wikipedia, "Cohen's kappa": 50 proposals, both yes 20, A yes B no 5,
    # A no B yes 10, both no 15 → p_o 0.7, p_e 0.5, κ 0.4
    k = cohen_kappa(Confusion(yes_yes=20, yes_no=5, no_yes=10, no_no=15))
    assert (k.n, k.observed_agreement, k.expected_agreement) == (50, 0.7, 0.5)
    assert k.kappa == pytest.approx(0.4, abs=1e-12)


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=300))
def test_matches_independent_implementations(pairs) -> None:
    c = Confusion.count(pairs)
    a, b, cc, d = c.yes_yes, c.yes_no, c.no_yes, c.no_no
    assume((a + b) * (b + d) + (a + cc) * (cc + d) != 0)  # expected agreement 1
    k = cohen_kappa(c)
    assert k.kappa == pytest.approx(kappa_2x2(a, b, cc, d), abs=1e-12)
    assert k.kappa == pytest.approx(
        kappa_lists([p[0] for p in pairs], [p[1] for p in pairs]), abs=1e-9
    )
    assert -1 <= k.kappa <= 1


@pytest.mark.parametrize("table", [Confusion(yes_yes=30), Confusion(no_no=30)])
def test_expected_agreement_one_is_an_error(table) -> None:
    with pytest.raises(KappaError, match="expected agreement is 1"):
        cohen_kappa(table, min_n=20)


def test_too_few_pairs_is_an_error() -> None:
    with pytest.raises(KappaError, match="only 19 pair"):
        cohen_kappa(Confusion(yes_yes=9, no_no=10), min_n=20)
    with pytest.raises(KappaError, match="only 0 pair"):
        cohen_kappa(Confusion(), min_n=0)


def test_perfect_and_chance_agreement_are_values() -> None:
    assert cohen_kappa(Confusion(yes_yes=5, no_no=5)).kappa == 1
    assert cohen_kappa(Confusion(yes_yes=5, yes_no=5, no_yes=5, no_no=5)).kappa == 0


def test_overlap_only() -> None:
    sha = [f"{i:064x}" for i in range(6)]
    labels = Labels("l", {("q", sha[i]): i % 2 == 0 for i in range(4)})
    calib = Labels("c", {("q", sha[i]): i in (0, 3) for i in range(2, 6)})
    k = kappa_between(labels, calib, 1)
    # overlap: sha2 (yes, no), sha3 (no, yes)
    assert k.n == 2 and k.confusion == Confusion(yes_no=1, no_yes=1)
