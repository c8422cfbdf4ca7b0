"""grumem.core.calibration: the sample's strata shares, the pairs drawn, the lines a
filled sample must hold."""

from __future__ import annotations

from grumem.core.calibration import allocate


def test_allocate_gives_equal_shares_capped_by_size():
    sizes = {("a", False): 30, ("a", True): 2, ("b", False): 10, ("b", True): 10}
    assert allocate(sizes, 20) == {("a", False): 6, ("a", True): 2, ("b", False): 6, ("b", True): 6}
    assert allocate(sizes, 1000) == sizes
    assert sum(allocate(sizes, 7).values()) == 7
