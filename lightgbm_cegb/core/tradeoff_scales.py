"""Trade-off scales: the smallest value of a method's trade-off at which its model reads no feature."""

from __future__ import annotations

import math
from collections.abc import Callable

from lightgbm_cegb.core.errors import CEGBError, NothingToTradeOff


def no_split_scale(splits: Callable[[float], bool], name: str, rel_tol: float = 1e-3) -> float:
    """The smallest trade-off ``t`` at which ``splits(t)`` (the first tree has a split) is False, by geometric
    bisection to ``rel_tol``; ``splits`` falls from True to False as ``t`` grows. NothingToTradeOff when the first
    tree makes no split even without costs (too few rows, a constant target): there is nothing to weigh."""
    if not splits(0.0):
        raise NothingToTradeOff(f"{name}: the first tree makes no split even without costs (too few rows or a "
                                "constant target?)")
    lo, hi = 0.0, 1.0
    while splits(hi):
        lo, hi = hi, hi * 16
        if hi > 1e30:
            raise CEGBError(f"{name}: every trade-off up to 1e30 still splits: some costs are too small for a "
                            "trade-off to weigh (1e30 times them is still less than what a split gains); give the "
                            "costs in a larger unit, or 0 to a free feature")
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


