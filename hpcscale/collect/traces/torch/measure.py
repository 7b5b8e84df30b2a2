"""Compute time measured against small interval sets without building compute itself.

A rank's compute is B less C: B its busy time (the training thread's work, or the compute
kernels), sorted and disjoint and as long as the trace (millions of rows in a big one), C the
few c10d calls. Every figure the reader gives is |compute ∩ X| for a small X (the window, a
step, communication), so B is only ever searched: |B ∩ (-inf, t)| is a prefix sum found by
bisection, and |(B − C) ∩ X| = |B ∩ X| − |B ∩ (C ∩ X)|. No sweep over B's millions of
boundaries, no copy of B.
"""

from __future__ import annotations

import numpy as np

from hpcscale.collect import intervals as iv


def clip(x: iv.Intervals, lo: int, hi: int) -> iv.Intervals:
    """The part of sorted disjoint intervals inside [lo, hi), found by bisection."""
    if not len(x):
        return x
    a = int(np.searchsorted(x[:, 1], lo, side="right"))
    b = int(np.searchsorted(x[:, 0], hi, side="left"))
    c = np.clip(x[a:b], lo, hi)
    return c[c[:, 1] > c[:, 0]]


def _meet(a: iv.Intervals, b: iv.Intervals) -> iv.Intervals:
    """a ∩ b for disjoint sets, as disjoint pieces in any order: pairwise for small sets (a
    step's few calls and collectives), by the general sweep for big ones."""
    if not len(a) or not len(b):
        return iv.EMPTY
    if len(a) * len(b) > 1 << 16:
        return iv.intersection(a, b)
    lo = np.maximum(a[:, :1], b[:, 0])
    hi = np.minimum(a[:, 1:], b[:, 1])
    keep = hi > lo
    return np.column_stack((lo[keep], hi[keep]))


class Compute:
    """B less C (see the module); `length(x)` is its time inside x."""

    def __init__(self, busy: iv.Intervals, calls: iv.Intervals) -> None:
        self.busy = busy
        self.calls = iv.union(calls)
        self.cum = np.concatenate(([0], np.cumsum(busy[:, 1] - busy[:, 0]))).astype(np.int64)

    def _before(self, t: np.ndarray) -> np.ndarray:
        """|B ∩ (-inf, t)| for each t."""
        k = np.searchsorted(self.busy[:, 0], t, side="left")  # rows starting before t
        out = self.cum[k]
        last = k - 1
        has = last >= 0
        over = np.zeros(len(t), dtype=np.int64)
        over[has] = np.maximum(self.busy[last[has], 1] - t[has], 0)
        return out - over  # type: ignore[no-any-return]

    def _busy_in(self, x: iv.Intervals) -> int:
        """|B ∩ x| for disjoint x."""
        if not len(x) or not len(self.busy):
            return 0
        return int((self._before(x[:, 1]) - self._before(x[:, 0])).sum())

    def length(self, x: iv.Intervals | None = None) -> int:
        """|(B − C) ∩ x| (x sorted and disjoint; None: all of it)."""
        if x is None:
            return int(self.cum[-1]) - self._busy_in(self.calls)
        if not len(x):
            return 0
        calls = clip(self.calls, int(x[0, 0]), int(x[-1, 1]))
        return self._busy_in(x) - self._busy_in(_meet(calls, x))
