"""Results computed from a frame, kept for the next call with the same frame: a report asks the
same questions of its run table in many sections (normalise alone was 13 times per report), and
a 1,000-run sweep made each answer cost. An entry is used only while the frame it was computed
from is the same object (or, `by_value`, an equal frame) and still holds what it held then
(compared with a copy taken at the time): a frame changed in between is computed again, never
answered from the memo."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import pandas as pd

# pandas 3 copies on write: a shallow copy is a snapshot. pyproject allows pandas 2 still, where
# it shares the frame's arrays (an in-place edit would reach the snapshot)
COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3

T = TypeVar("T")
SIZE = 4  # entries kept per memo: a report uses one or two frames at a time


class FrameMemo(Generic[T]):
    """The last SIZE results of `compute(frame)` by (frame, key); `copy` gives each caller its
    own copy of a result (a caller may change what it got). `by_value`: a frame equal to the
    one a result was computed from gets it too (callers that each make their own copy)."""

    def __init__(self, copy: Callable[[T], T], by_value: bool = False) -> None:
        self._copy = copy
        self._by_value = by_value
        self._entries: list[tuple[pd.DataFrame, Hashable, pd.DataFrame, T]] = []

    def get(self, frame: pd.DataFrame, key: Hashable, compute: Callable[[], T]) -> T:
        for source, k, snapshot, result in self._entries:
            same = source is frame or (self._by_value and frame.shape == snapshot.shape)
            if same and k == key and unchanged(frame, snapshot):
                return self._copy(result)
        result = compute()
        # copy-on-write (pandas 3): a shallow copy keeps what the frame holds now, whatever is
        # done to the frame later, without copying its columns
        snapshot = frame.copy(deep=not COPY_ON_WRITE)
        self._entries.insert(0, (frame, key, snapshot, self._copy(result)))
        del self._entries[SIZE:]
        return result

    def clear(self) -> None:
        self._entries.clear()


def unchanged(frame: pd.DataFrame, snapshot: pd.DataFrame) -> bool:
    """Whether `frame` still holds what `snapshot` (its copy) held: columns, dtypes, index and
    values (NaN equal to NaN); a comparison that fails counts as changed."""
    try:
        return (
            frame.shape == snapshot.shape
            and frame.columns.equals(snapshot.columns)
            and frame.dtypes.equals(snapshot.dtypes)
            and frame.index.equals(snapshot.index)
            and bool(frame.equals(snapshot))
        )
    except Exception:  # an uncomparable value: computed again
        return False
