"""Whether two cells differ by more than their noise: only when their intervals do not overlap
(hpcscale.analysis.intervals), and how often that rule calls a difference that is not there."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from hpcscale.analysis.intervals import LEVEL, median_rank

Verdict = Literal["faster", "slower", "within noise", "no interval"]


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool | None:
    """Whether two closed intervals share a point; None when either is missing (NaN)."""
    if not all(np.isfinite(v) for v in (*a, *b)):
        return None
    return bool(a[0] <= b[1] and b[0] <= a[1])


def verdict(
    value_a: float,
    ci_a: tuple[float, float],
    value_b: float,
    ci_b: tuple[float, float],
    higher_is_better: bool,
) -> Verdict:
    """How A compares with B: 'faster' / 'slower' only when the intervals do not overlap."""
    over = overlaps(ci_a, ci_b)
    if over is None:
        return "no interval"
    if over:
        return "within noise"
    better = value_a > value_b if higher_is_better else value_a < value_b
    return "faster" if better else "slower"


def false_call_rate(n_a: int, n_b: int, level: float = LEVEL) -> float:
    """How often two cells of one continuous distribution get non-overlapping order-statistic
    intervals (so one is called faster though neither is): exact, from the ranks alone.
    A's upper end x_(r) lies below B's lower end y_(s) when at least r of the r + s - 1
    smallest pooled values are A's (hypergeometric); either way round."""
    ka, _ = median_rank(n_a, level)
    kb, _ = median_rank(n_b, level)
    if ka == 0 or kb == 0:
        return math.nan

    def below(n1: int, k1: int, n2: int, k2: int) -> float:
        r, s = n1 + 1 - k1, k2
        m, total = r + s - 1, math.comb(n1 + n2, r + s - 1)
        return sum(math.comb(n1, j) * math.comb(n2, m - j) for j in range(r, m + 1)) / total

    return below(n_a, ka, n_b, kb) + below(n_b, kb, n_a, ka)
