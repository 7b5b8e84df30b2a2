"""Numbers as people read them in a table: one formatting rule shared by Markdown and HTML."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd

MISSING = "–"
# frames already shown (id -> (frame, shown)) while `shared_display` is on: Markdown and HTML
# show the same tables, and a sweep's tables hold hundreds of thousands of cells
_SHOWN: ContextVar[dict[tuple[int, bool], tuple[pd.DataFrame, pd.DataFrame]] | None] = ContextVar(
    "shown", default=None
)


def cell(value: Any) -> str:
    """Integers plain (thousands separated from 10 000), floats to a precision that suits their
    size, NaN/None as an en dash so empty cells are visibly empty, not zero."""
    kind = type(value)  # the exact types a frame's tolist() gives first: no ABC checks for them
    if kind is float:
        return _real(value)
    if kind is str:
        return value
    if kind is int:
        return _integer(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return _integer(int(value))
    if isinstance(value, Real):
        return _real(float(value))
    return str(value)


def _integer(v: int) -> str:
    return f"{v:,}" if abs(v) >= 10_000 else str(v)


# A float's cases, one format each, as `_real` picks them for a value and `_reals` for a column
_REAL_FORMATS = (
    str,  # 0: a whole number below 10 000 (as an int)
    "{:,}".format,  # 1: a whole number from 10 000 (as an int)
    "{:,.0f}".format,  # 2: 10 000 and up
    "{:.1f}".format,  # 3: 100 and up
    "{:.2f}".format,  # 4: 1 and up
    "{:.3g}".format,  # 5: below 1
)


def _real(v: float) -> str:
    if math.isnan(v):
        return MISSING
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    a = abs(v)
    if v.is_integer() and a < 1e15:
        return _REAL_FORMATS[0 if a < 10_000 else 1](int(v))
    return _REAL_FORMATS[2 if a >= 10_000 else 3 if a >= 100 else 4 if a >= 1 else 5](v)


def _reals(values: np.ndarray) -> list[str]:
    """`_real` of each value of a float array, the same strings: each value's case found for
    the whole array at once, then each case's values formatted together (a sweep's tables
    hold tens of thousands of floats, and a call per value was most of their formatting)."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return []
    a = np.abs(v)
    nan, inf = np.isnan(v), np.isinf(v)
    whole = (v == np.trunc(v)) & (a < 1e15)  # float.is_integer() (NaN and ±∞ are not)
    case = np.select(
        [nan, inf, whole & (a < 10_000), whole, a >= 10_000, a >= 100, a >= 1],
        [-1, -2, 0, 1, 2, 3, 4],
        default=5,
    )
    cases = np.unique(case).tolist()
    if len(cases) == 1 and cases[0] >= 0:  # one case (a column of one magnitude): as it is
        c = cases[0]
        return list(map(_REAL_FORMATS[c], (v.astype(np.int64) if c <= 1 else v).tolist()))
    out = np.empty(len(v), dtype=object)
    for c in cases:
        at = case == c
        if c == -1:
            out[at] = MISSING
        elif c == -2:
            out[at] = np.where(v[at] > 0, "∞", "-∞").astype(object)
        else:
            got = v[at].astype(np.int64) if c <= 1 else v[at]
            shown = np.empty(len(got), dtype=object)
            shown[:] = list(map(_REAL_FORMATS[c], got.tolist()))
            out[at] = shown
    return out.tolist()


def display(frame: pd.DataFrame, drop_empty: bool = True) -> pd.DataFrame:
    """Every cell as a string (column names kept); columns with no value at all are dropped,
    since a column of dashes says nothing (e.g. efficiency in a campaign that does not scale).
    Inside `shared_display` a frame is formatted once (the result is shared: do not modify)."""
    memo = _SHOWN.get()
    key = (id(frame), drop_empty)
    if memo is not None and key in memo and memo[key][0] is frame:
        return memo[key][1]
    source = frame
    if drop_empty and len(frame):
        frame = frame.loc[:, frame.notna().any(axis=0)]
    shown = {col: _column(frame[col]) for col in frame.columns}
    # object columns: the strings stay the Python strings made here (an Arrow string column
    # would convert them in, and back out for Markdown and HTML)
    out = pd.DataFrame(shown, index=pd.RangeIndex(len(frame)), columns=list(shown), dtype=object)
    if memo is not None:
        memo[key] = (source, out)
    return out


def _column(values: pd.Series) -> list[str]:
    """`cell` of each value: a float column's values formatted directly (`_reals`), an integer
    column's too, a column of strings only as it is, any other column's each distinct value
    once (a sweep's columns repeat a few settings a thousand times)."""
    if values.dtype == "float64":
        return _reals(values.to_numpy())
    items = values.tolist()
    if values.dtype == "int64":  # Python ints: `_integer` of each
        return [str(v) if -10_000 < v < 10_000 else f"{v:,}" for v in items]
    if set(map(type, items)) == {str}:  # `cell` of a str is the str
        return items
    try:
        shown = {(type(v), v): cell(v) for v in items}  # by type too: True == 1, shown apart
    except TypeError:  # unhashable values (lists): each on its own
        return [cell(v) for v in items]
    return [shown[type(v), v] for v in items]


@contextmanager
def shared_display() -> Iterator[None]:
    """Format each table once while writing several formats of one report (its frames must not
    change meanwhile)."""
    token = _SHOWN.set({})
    try:
        yield
    finally:
        _SHOWN.reset(token)
