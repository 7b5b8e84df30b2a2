"""Which trace a table's communication figures came from (the collector's `trace_source`): a
table whose rows share one source says it in its section's text; a table whose rows mix them
(cells of one framework beside another's) gets a "From" column, as the iteration table names its
step time's source."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping

import pandas as pd

from hpcscale.analysis.overlap import row_sources, sources_phrase

FROM = "From"


def mixed(rows: pd.DataFrame, measured: str = "comm_s") -> bool:
    """Whether the rows with a `measured` figure take it from more than one source."""
    return len({s for s in row_sources(rows, measured) if s}) > 1


def with_source(
    table: pd.DataFrame,
    rows: pd.DataFrame,
    match: Mapping[str, str],
    after: str,
    measured: str = "comm_s",
) -> pd.DataFrame:
    """`table` with a "From" column after `after` when its rows mix sources; each table row is
    matched back to its row of `rows` on `match` (table column -> row column, values copied
    unchanged by the analysis tables; missing equal to missing). Unchanged when one source (or
    none) holds, or when a row cannot be matched (never a wrong label)."""
    if table.empty or not mixed(rows, measured) or not set(match) <= set(table.columns):
        return table
    sources = row_sources(rows, measured)
    waiting: dict[tuple, deque[str]] = {}
    for k, rec in enumerate(rows[list(match.values())].itertuples(index=False)):
        waiting.setdefault(_key(rec), deque()).append(sources[k])
    labels = []
    for rec in table[list(match)].itertuples(index=False):
        hits = waiting.get(_key(rec))
        if not hits:
            return table
        labels.append(hits.popleft())
    out = table.copy()
    at = list(out.columns).index(after) + 1 if after in out.columns else len(out.columns)
    out.insert(at, FROM, labels)
    return out


def _key(values: tuple) -> tuple:
    """A row's match values, NaN/None as one missing value (NaN is never equal to itself)."""
    return tuple(
        None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values
    )


def source_sentence(rows: pd.DataFrame, measured: str = "comm_s") -> list[str]:
    """The section's sentence naming where its communication figures came from (none without a
    measured figure)."""
    found = row_sources(rows, measured)
    if not any(found):
        return []
    return [f"Communication figures from {sources_phrase(found)}."]
