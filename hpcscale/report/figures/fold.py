"""Figures that stay readable at scale: a panel never draws more lines (or bars, or a section
more figures) than a reader can tell apart. What is not drawn is folded, and said so.

A sweep of 500 knob settings at two sizes is 500 scaling groups: 500 lines with 500 legend
entries are no figure. Past MAX_LINES groups a line figure draws the best and the worst groups
(by a named score, e.g. efficiency at the largest size) and the others as one grey band, their
minimum to maximum at each size; the figure's note (`note_of`, appended to the plot's caption by
`model.plot_if`) says how many were folded, how the drawn ones were chosen, and that every group
is in the section's table (and in data/<campaign>-<table>.csv with `report -f csv`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

MAX_LINES = 8  # lines in one panel: distinct colours a reader tells apart (the palette has 10)
MAX_BARS = 24  # bars in one panel, each named on the axis
MAX_FIGURES = 6  # figures of one kind in a section (one per line group)
BAND_COLOUR = "0.82"
FULL_TABLE = (
    "every one is in the section's table (and in data/<campaign>-<table>.csv with "
    "`hpcscale report -f csv`)"
)
_NOTE = "_hpcscale_note"


@dataclass(frozen=True)
class Folded:
    """Groups a figure does not draw one by one."""

    rows: pd.DataFrame  # their cells
    count: int  # groups folded
    total: int  # groups in all
    rule: str  # how the drawn ones were chosen

    @property
    def legend(self) -> str:
        return f"{self.count} other groups: their range (min to max)"

    def note(self, band: bool = True) -> str:
        """What the caption says: how many were drawn and how chosen, where the rest are."""
        shown = self.total - self.count
        rest = (
            "folded into the grey band (their minimum to maximum at each size)"
            if band
            else "not drawn"
        )
        return (
            f"{shown} of {self.total} groups drawn ({self.rule}); the other {self.count} are "
            f"{rest}; {FULL_TABLE}."
        )

    def band(self, ax: Axes, metric: str, x: str = "axis_value") -> None:
        """The folded groups' range of `metric` at each `x` as a grey band behind the lines."""
        rows = self.rows[[x, metric]].dropna()
        if rows.empty:
            return
        span = rows.groupby(x)[metric].agg(["min", "max"]).sort_index()
        ax.fill_between(
            span.index.to_numpy(float),
            span["min"].to_numpy(float),
            span["max"].to_numpy(float),
            color=BAND_COLOUR,
            lw=0,
            zorder=0,
            label=self.legend,
        )


def fold_groups(
    cells: pd.DataFrame,
    score: str = "efficiency",
    higher_is_better: bool = True,
    max_lines: int = MAX_LINES,
    key: str = "group",
) -> tuple[pd.DataFrame, Folded | None]:
    """The cells of at most `max_lines` groups, and the rest folded (None: all fit).

    Drawn: the best half and the worst half of the groups by `score` at each group's largest
    axis value (ties and groups without a score after those with one, by group id), so the
    spread of the sweep stays visible; the rest are folded."""
    ids = list(pd.unique(cells[key]))
    if len(ids) <= max_lines:
        return cells, None
    last = cells.sort_values("axis_value", kind="stable").groupby(key).tail(1)
    values = pd.to_numeric(last.set_index(key)[score], errors="coerce") if score in last else None
    order = pd.Series(np.nan, index=pd.Index(sorted(ids))) if values is None else values
    order = order.reindex(sorted(ids))
    ranked = order.dropna().sort_values(ascending=not higher_is_better, kind="stable")
    best, worst = max_lines - max_lines // 2, max_lines // 2
    chosen = list(dict.fromkeys([*ranked.index[:best], *ranked.index[::-1][:worst]]))
    chosen += [g for g in order.index if g not in chosen][: max(0, max_lines - len(chosen))]
    chosen = chosen[:max_lines]
    shown = cells[key].isin(chosen)
    word = "highest" if higher_is_better else "lowest"
    rule = (
        f"the {best} with the {word} and the {worst} with the "
        f"{'lowest' if higher_is_better else 'highest'} {score.replace('_', ' ')} at their "
        "largest size"
    )
    folded = Folded(cells[~shown], len(ids) - len(chosen), len(ids), rule)
    return cells[shown], folded


def spread_pick(
    rows: pd.DataFrame, metric: str, by: str = "axis_value", limit: int = MAX_BARS
) -> tuple[pd.DataFrame, str]:
    """At most `limit` rows: at each `by` value the lowest, the median and the highest by
    `metric` (fewer when they coincide); all rows when they fit. The note says what was drawn
    ("" when all were)."""
    if len(rows) <= limit:
        return rows, ""
    keep: list = []
    for _, g in rows.groupby(by, sort=True):
        g = g.sort_values(metric, kind="stable", na_position="last")
        n = int(g[metric].notna().sum())
        picks = [0, (n - 1) // 2, n - 1] if n else [0]
        keep += [g.index[i] for i in dict.fromkeys(picks)]
    keep = list(dict.fromkeys(keep))[:limit]
    out = rows.loc[[i for i in rows.index if i in set(keep)]]
    note = (
        f"{len(out)} of {len(rows)} cells drawn: at each size the lowest, median and highest "
        f"{metric.replace('_', ' ')}; {FULL_TABLE}."
    )
    return out, note


def spaced(items: Sequence, limit: int = MAX_FIGURES) -> list:
    """At most `limit` of `items`, evenly spaced from the first to the last (all when they
    fit): a section's figures then cover the whole sweep."""
    items = list(items)
    if len(items) <= limit:
        return items
    picks = np.linspace(0, len(items) - 1, limit).round().astype(int)
    return [items[i] for i in dict.fromkeys(picks.tolist())]


def with_note(fig: Figure | None, note: str) -> Figure | None:
    """`fig` carrying `note` for its caption (`model.plot_if` appends it)."""
    if fig is not None and note:
        setattr(fig, _NOTE, " ".join(filter(None, [getattr(fig, _NOTE, ""), note])))
    return fig


def note_of(fig: Figure | None) -> str:
    """What a figure says it left out ("" when nothing)."""
    return str(getattr(fig, _NOTE, "")) if fig is not None else ""
