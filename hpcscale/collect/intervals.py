"""Interval arithmetic on integer time stamps, vectorised with NumPy.

An interval set is an `(n, 2)` int64 array of `[start, end)` rows. A trace may write one B/E
pair per tensor, so tensors fused into one operation carry identical intervals: any time total
must come from the *union*, never from a sum of durations. Every function here is pure.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

Intervals = npt.NDArray[np.int64]

EMPTY: Intervals = np.empty((0, 2), dtype=np.int64)


def as_intervals(rows: npt.ArrayLike) -> Intervals:
    """Coerce to an `(n, 2)` int64 array; rows with end < start are rejected (a caller's bug)."""
    arr = np.asarray(rows, dtype=np.int64)
    if arr.size == 0:
        return EMPTY.copy()
    arr = arr.reshape(-1, 2)
    if np.any(arr[:, 1] < arr[:, 0]):
        raise ValueError("interval with end before start")
    return arr


def union(rows: npt.ArrayLike) -> Intervals:
    """Sorted, disjoint intervals covering the same time; touching intervals are joined."""
    iv = as_intervals(rows)
    if len(iv) <= 1:
        return iv.copy()
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    starts, ends = iv[:, 0], np.maximum.accumulate(iv[:, 1])
    # A new block starts where the start lies beyond every end seen so far.
    new = np.empty(len(iv), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > ends[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(iv) - 1)
    return np.column_stack((starts[first], ends[last]))


def length(rows: npt.ArrayLike) -> int:
    """Total time covered (the union's length)."""
    iv = union(rows)
    return int((iv[:, 1] - iv[:, 0]).sum())


def sum_lengths(disjoint: Intervals) -> int:
    """Total length of intervals already known to be disjoint (a union's output)."""
    return int((disjoint[:, 1] - disjoint[:, 0]).sum()) if len(disjoint) else 0


class Split(NamedTuple):
    """How two interval sets share time: only in a, only in b, in both."""

    a_only: int
    b_only: int
    both: int


def _coverage(a: Intervals, b: Intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sweep line over both sets' boundaries: the segments between consecutive boundaries and
    how many of each set covers them."""
    a, b = union(a), union(b)
    points = np.concatenate((a[:, 0], a[:, 1], b[:, 0], b[:, 1]))
    delta_a = np.concatenate(
        (np.ones(len(a), np.int64), -np.ones(len(a), np.int64), np.zeros(2 * len(b), np.int64))
    )
    delta_b = np.concatenate(
        (np.zeros(2 * len(a), np.int64), np.ones(len(b), np.int64), -np.ones(len(b), np.int64))
    )
    order = np.argsort(points, kind="stable")
    points, delta_a, delta_b = points[order], delta_a[order], delta_b[order]
    in_a = np.cumsum(delta_a)[:-1] > 0 if len(points) else np.empty(0, bool)
    in_b = np.cumsum(delta_b)[:-1] > 0 if len(points) else np.empty(0, bool)
    seg = np.diff(points) if len(points) else np.empty(0, np.int64)
    return seg, in_a, in_b


def sweep(a: npt.ArrayLike, b: npt.ArrayLike) -> Split:
    """Time only in `a`, only in `b` and in both (each set is unioned first)."""
    seg, in_a, in_b = _coverage(as_intervals(a), as_intervals(b))
    return Split(
        a_only=int(seg[in_a & ~in_b].sum()),
        b_only=int(seg[in_b & ~in_a].sum()),
        both=int(seg[in_a & in_b].sum()),
    )


def _segments(a: npt.ArrayLike, b: npt.ArrayLike, keep: str) -> Intervals:
    iv_a, iv_b = as_intervals(a), as_intervals(b)
    seg, in_a, in_b = _coverage(iv_a, iv_b)
    if not len(seg):
        return EMPTY.copy()
    points = np.sort(np.concatenate((union(iv_a).ravel(), union(iv_b).ravel())), kind="stable")
    mask = (in_a & in_b) if keep == "both" else (in_a & ~in_b)
    mask &= seg > 0
    return union(np.column_stack((points[:-1][mask], points[1:][mask])))


def intersection(a: npt.ArrayLike, b: npt.ArrayLike) -> Intervals:
    """Time covered by both sets, as disjoint intervals."""
    return _segments(a, b, "both")


def difference(a: npt.ArrayLike, b: npt.ArrayLike) -> Intervals:
    """Time covered by `a` but not by `b`, as disjoint intervals."""
    return _segments(a, b, "a_only")
