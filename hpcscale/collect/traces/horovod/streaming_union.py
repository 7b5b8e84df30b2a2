"""A union of intervals that arrive roughly in time order, folded as they become final.

Timelines reach gigabytes: holding every span to union at the end would hold the file. Spans
arrive in `ts` order (with some leeway), so whatever ends before a watermark can be summed and
dropped.
"""

from __future__ import annotations

import numpy as np

from hpcscale.collect import intervals as iv


class StreamingUnion:
    """Streaming union of intervals: whatever ends before the watermark (no later interval can
    start earlier) is final and folded into a total, so memory stays bounded."""

    __slots__ = ("count", "done_us", "keep", "kept", "tail", "watermark")

    def __init__(self, keep: bool = False) -> None:
        self.count = 0
        self.done_us = 0
        self.keep = keep
        self.kept: list[iv.Intervals] = []
        self.tail = iv.EMPTY
        self.watermark: int | None = None

    def add(self, rows: iv.Intervals, watermark: int | None) -> int:
        """Merge `rows`; returns how many started before an earlier watermark."""
        self.count += len(rows)
        late = 0
        if self.watermark is not None and len(rows):
            early = rows[:, 0] < self.watermark
            late = int(early.sum())
            if late:  # what precedes the final part cannot be unioned any more: clip it off
                rows = rows.copy()
                rows[early, 0] = self.watermark
                rows = rows[rows[:, 1] > rows[:, 0]]
        merged = iv.union(np.concatenate((self.tail, rows)) if len(self.tail) else rows)
        if watermark is None:
            self.tail = merged
            return late
        k = int(np.searchsorted(merged[:, 1], watermark, side="right"))
        self.done_us += iv.sum_lengths(merged[:k])
        if self.keep and k:
            self.kept.append(merged[:k])
        self.tail = merged[k:]
        self.watermark = watermark if self.watermark is None else max(self.watermark, watermark)
        return late

    def copy(self) -> StreamingUnion:
        """The same union so far (its final total, open tail and watermark), to grow apart."""
        out = StreamingUnion(keep=False)
        out.count, out.done_us, out.tail = self.count, self.done_us, self.tail.copy()
        out.watermark = self.watermark
        return out

    def total_us(self) -> int:
        return self.done_us + iv.sum_lengths(self.tail)

    def intervals(self) -> iv.Intervals:
        parts = [*self.kept, self.tail]
        return np.concatenate(parts) if len(parts) > 1 else self.tail.copy()
