"""Numbers as people read them in a table: one formatting rule shared by Markdown and HTML."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import pandas as pd

MISSING = "–"


def cell(value: Any) -> str:
    """Integers plain (thousands separated from 10 000), floats to a precision that suits their
    size, NaN/None as an en dash so empty cells are visibly empty, not zero."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value))
    if isinstance(value, Real):
        v = float(value)
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}" if abs(v) >= 10_000 else str(int(v))
        a = abs(v)
        if a >= 10_000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    return str(value)


def display(frame: pd.DataFrame, drop_empty: bool = True) -> pd.DataFrame:
    """Every cell as a string (column names kept); columns with no value at all are dropped,
    since a column of dashes says nothing (e.g. efficiency in a campaign that does not scale)."""
    if drop_empty and len(frame):
        frame = frame.loc[:, frame.notna().any(axis=0)]
    out = pd.DataFrame(index=frame.index)
    for col in frame.columns:
        out[col] = [cell(v) for v in frame[col].tolist()]
    return out.reset_index(drop=True)
