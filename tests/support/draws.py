"""Deterministic draws per request: which attempt fails, how long a completion is.

Each draw is a hash of the request body's sha256 (and the attempt), so a
rerun, another process or a test computing the expectation sees the same.
"""

from __future__ import annotations

import hashlib
import math
from statistics import NormalDist

from support.script import Faults, TokenDist


def unit_hash(*parts: object) -> float:
    """A deterministic number in (0, 1) from the parts (never exactly 0 or 1)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


def fault_for(faults: Faults | None, sha: str, attempt: int) -> str | None:
    """The fault of attempt `attempt` (0-based) of the body with this sha, or None."""
    if faults is None or (faults.only_first and attempt > 0):
        return None
    if unit_hash("fault", faults.seed, sha, attempt) >= faults.rate:
        return None
    pick = unit_hash("kind", faults.seed, sha, attempt)
    return faults.kinds[min(int(pick * len(faults.kinds)), len(faults.kinds) - 1)]


def draw_tokens(dist: TokenDist, sha: str) -> int:
    """Completion length for a request: fixed, or lognormal seeded by its sha."""
    if dist.fixed is not None:
        return dist.fixed
    z = NormalDist().inv_cdf(unit_hash("tokens", dist.seed, sha))
    n = max(1, round(math.exp(dist.mu + dist.sigma * z)))
    return n if dist.cap is None else min(n, dist.cap)
