"""Confidence intervals and an exact test, in the standard library's arithmetic.

Small formulas, written here rather than taken from scipy or statsmodels (neither
is a dependency; numpy only comes with matplotlib and pyarrow): each is held by
tests to values published for it.

- `wilson`: the Wilson score interval of a proportion k/n (Wilson 1927), which
  stays inside [0, 1] and is sound for the small and extreme counts an evaluation
  meets (0 of 6, 6 of 6), where the normal approximation is not.
- `sign_test`: the exact two-sided binomial test of b against c with p = 1/2, which
  is McNemar's exact test when b and c are the discordant pairs of a paired binary
  outcome.
- `bootstrap`: percentile intervals of statistics of summed group vectors, the
  groups drawn with replacement by a seeded generator: the same inputs give the
  same interval on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from operator import itemgetter
from statistics import NormalDist

__all__ = ["CONFIDENCE", "Interval", "bootstrap", "percentile", "sign_test", "wilson"]

CONFIDENCE = 0.95

Interval = tuple[float, float]
# a statistic of the summed vector of the drawn groups; None where it is undefined
Statistic = Callable[[Sequence[float]], float | None]


def _z(confidence: float) -> float:
    """The normal quantile of a two-sided interval (1.959964 for 95%)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> Interval | None:
    """The Wilson score interval of k successes in n trials; None when n is 0."""
    if not 0 <= k <= n:
        raise ValueError(f"a proportion needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    z = _z(confidence)
    p = k / n
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    # at k = 0 (k = n) the bound is 0 (1) exactly; the formula leaves a rounding error
    return (0.0 if k == 0 else centre - half, 1.0 if k == n else centre + half)


def sign_test(b: int, c: int) -> float:
    """The exact two-sided p-value of b against c under Binomial(b + c, 1/2): twice the
    smaller tail, at most 1. 1 when there is nothing to compare (b = c = 0)."""
    if b < 0 or c < 0:
        raise ValueError(f"counts must not be negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    # exact integers to the end: the tail over 2**n, doubled
    return min(1.0, 2 * tail / (1 << n))


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly between order statistics
    (position q·(m − 1), as numpy's default and the spreadsheet PERCENTILE)."""
    if not ordered:
        raise ValueError("no values to take a percentile of")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def bootstrap(
    groups: Sequence[Sequence[float]],
    statistics: Sequence[Statistic],
    resamples: int,
    seed: int,
    confidence: float = CONFIDENCE,
) -> list[Interval | None]:
    """Percentile intervals of each statistic over `resamples` bootstrap samples.

    A sample draws len(groups) groups with replacement (one draw serves every
    statistic) and sums their vectors; a statistic sees the sum. A statistic that is
    undefined in a sample (None: a ratio whose denominator drew 0) is left out of that
    sample's values; its interval is None when fewer than two groups were given
    (one group has no spread to resample) or no sample defined it."""
    out: list[list[float]] = [[] for _ in statistics]
    if len(groups) < 2:
        return [None for _ in statistics]
    # by column: a sample's sums are C loops over the drawn rows (itemgetter), many
    # times the speed of adding the vectors one by one in Python; fsum is exactly
    # rounded, so the sums are the same on every Python (sum() of floats is not)
    columns = list(zip(*groups, strict=True))
    rng = random.Random(seed)
    indices = range(len(groups))
    for _ in range(resamples):
        drawn = itemgetter(*rng.choices(indices, k=len(groups)))
        total = [math.fsum(drawn(column)) for column in columns]
        for values, statistic in zip(out, statistics, strict=True):
            value = statistic(total)
            if value is not None:
                values.append(value)
    alpha = (1 - confidence) / 2
    intervals: list[Interval | None] = []
    for values in out:
        if not values:
            intervals.append(None)
            continue
        values.sort()
        intervals.append((percentile(values, alpha), percentile(values, 1 - alpha)))
    return intervals
