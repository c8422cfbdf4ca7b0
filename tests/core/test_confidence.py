"""grumem.core.confidence against published values: Wilson intervals (Newcombe 1998,
Table I, method 3; and the textbook 8 of 10), exact binomial tail p-values, the
percentile rule, and the seeded bootstrap."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.core.confidence import bootstrap, percentile, sign_test, wilson


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # Newcombe, "Two-sided confidence intervals for the single proportion" (1998),
        # Table I, the score method without continuity correction
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
        # 8 of 10 (statsmodels' proportion_confint(8, 10, method="wilson"))
        (8, 10, 0.4902, 0.9433),
        (10, 10, 0.7225, 1.0),
    ],
)
def test_wilson_matches_published_intervals(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)  # type: ignore[misc]
    assert (round(lo, 4), round(hi, 4)) == (low, high)


def test_wilson_of_nothing_is_none_and_a_bad_count_is_refused() -> None:
    assert wilson(0, 0) is None
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson(3, 2)


@given(st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_holds_the_proportion_inside_0_1(kn: tuple[int, int]) -> None:
    k, n = kn
    ci = wilson(k, n)
    if n == 0:
        assert ci is None
        return
    assert ci is not None
    assert 0 <= ci[0] <= k / n <= ci[1] <= 1
    assert (ci[0] == 0) == (k == 0) and (ci[1] == 1) == (k == n)


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (1, 9, 22 / 1024),  # 2 * (1 + 10) / 2**10
        (2, 8, 112 / 1024),  # 2 * (1 + 10 + 45) / 2**10
        (0, 5, 2 / 32),
        (5, 0, 2 / 32),
        (3, 3, 1.0),  # the two tails overlap: capped at 1
        (0, 0, 1.0),
        (0, 1, 1.0),
    ],
)
def test_sign_test_is_the_exact_two_sided_binomial_tail(b: int, c: int, p: float) -> None:
    assert sign_test(b, c) == p


def test_sign_test_is_the_probability_of_an_outcome_as_extreme() -> None:
    """P(X <= min(b, c) or X >= max(b, c)) under Binomial(b + c, 1/2), counted directly."""
    for b in range(12):
        for c in range(12):
            n = b + c
            extreme = sum(math.comb(n, i) for i in range(n + 1) if i <= min(b, c) or i >= max(b, c))
            assert sign_test(b, c) == pytest.approx(extreme / 2**n, rel=1e-12)


def test_percentile_interpolates_between_order_statistics() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile([1, 2, 3, 4], 0.0) == 1
    assert percentile([1, 2, 3, 4], 1.0) == 4
    assert percentile(list(range(101)), 0.025) == 2.5
    assert percentile([7], 0.975) == 7
    with pytest.raises(ValueError):
        percentile([], 0.5)


def _ratio(total: list[float]) -> float | None:
    return None if total[1] == 0 else total[0] / total[1]


def test_bootstrap_is_seeded_and_brackets_the_ratio() -> None:
    groups = [[3, 4], [1, 4], [4, 4], [0, 4], [2, 4], [4, 4]]  # 14 of 24
    one = bootstrap(groups, [_ratio], 500, seed=0)
    assert one == bootstrap(groups, [_ratio], 500, seed=0)
    assert one != bootstrap(groups, [_ratio], 500, seed=1)
    (ci,) = one
    assert ci is not None and ci[0] < 14 / 24 < ci[1] and ci[0] >= 0 and ci[1] <= 1


def test_bootstrap_without_spread_or_definition() -> None:
    constant = [[2, 1], [2, 1], [2, 1]]
    assert bootstrap(constant, [_ratio], 100, seed=0) == [(2.0, 2.0)]
    # one group: nothing to resample; a denominator never drawn: undefined
    assert bootstrap([[1, 2]], [_ratio], 100, seed=0) == [None]
    assert bootstrap([[1, 0], [2, 0]], [_ratio], 100, seed=0) == [None]
