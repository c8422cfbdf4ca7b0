"""Shared by the tests."""

from __future__ import annotations


def kappa_2x2(a: int, b: int, c: int, d: int) -> float:
    """Independent: the closed form for two categories, 2(ad − bc) / ((a+b)(b+d) + (a+c)(c+d))."""
    return 2 * (a * d - b * c) / ((a + b) * (b + d) + (a + c) * (c + d))
