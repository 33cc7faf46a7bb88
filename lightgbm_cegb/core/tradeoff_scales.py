"""Trade-off scales: the smallest value of a method's trade-off at which its model reads no feature."""

from __future__ import annotations

import math
from collections.abc import Callable

from lightgbm_cegb.core.errors import CEGBError


def no_split_scale(splits: Callable[[float], bool], name: str, rel_tol: float = 1e-3) -> float:
    """The smallest trade-off ``t`` at which ``splits(t)`` (the first tree has a split) is False, by geometric
    bisection to ``rel_tol``; ``splits`` falls from True to False as ``t`` grows."""
    if not splits(0.0):
        raise CEGBError(f"{name}: the first tree makes no split even without costs")
    lo, hi = 0.0, 1.0
    while splits(hi):
        lo, hi = hi, hi * 16
        if hi > 1e30:
            raise CEGBError(f"{name}: every trade-off up to 1e30 still splits; are all costs 0?")
    if lo == 0.0:
        lo = hi
        while not splits(lo):
            hi, lo = lo, lo / 16
            if lo < 1e-30:
                raise CEGBError(f"{name}: no trade-off down to 1e-30 splits")
    while hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if splits(mid) else (lo, mid)
    return hi


