"""Figures that stay readable at scale: a panel never draws more lines (or bars, or a section
more figures) than a reader can tell apart. What is not drawn is folded, and said so.

A sweep of 500 knob settings at two sizes is 500 scaling groups: 500 lines with 500 legend
entries are no figure. Past MAX_LINES groups a line figure draws the best and the worst groups
(by a named score, e.g. efficiency at the largest size) and the others as one grey band, their
minimum to maximum at each size; the figure's note (`note_of`, appended to the plot's caption by
`model.plot_if`) says how many were folded, how the drawn ones were chosen, and that every group
is in the section's table (and in data/<campaign>-<table>.csv with `report -f csv`). Every line
figure folds this way (scaling, batch, targets, plateau, the compare overlay); bar figures keep
the spread at evenly spaced sizes (`spread_pick`); sections draw evenly spaced figures (`spaced`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hpcscale.report.figures.reuse import NOTE_ATTR

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_LINES = 8  # lines in one panel: distinct colours a reader tells apart (the palette has 10)
MAX_BARS = 24  # bars in one panel, each named on the axis
MAX_FIGURES = 6  # figures of one kind in a section (one per line group)
BAND_COLOUR = "0.82"
FULL_TABLE = (
    "every one is in the section's table (and in `data/<campaign>-<table>.csv` with "
    "`hpcscale report -f csv`)"
)
_NOTE = NOTE_ATTR  # reuse keeps a reused figure's note there too


@dataclass(frozen=True)
class Folded:
    """Groups a figure does not draw one by one."""

    rows: pd.DataFrame  # their cells
    count: int  # groups folded
    total: int  # groups in all
    rule: str  # how the drawn ones were chosen
    unit: str = "groups"  # what a line is, for the note ("knob combinations", "sweeps")
    x_name: str = "size"  # what the x axis is, for the note ("batch size")

    @property
    def legend(self) -> str:
        return f"{self.count} other {self.unit}: their range (min to max)"

    def note(self, band: bool = True, where: str = FULL_TABLE) -> str:
        """What the caption says: how many were drawn and how chosen, where the rest are
        (`where`: the table that holds every one)."""
        shown = self.total - self.count
        rest = (
            f"folded into the grey band (their minimum to maximum at each {self.x_name})"
            if band
            else "not drawn"
        )
        return (
            f"{shown} of {self.total} {self.unit} drawn ({self.rule}); the other {self.count} "
            f"are {rest}; {where}."
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
    x: str = "axis_value",
    unit: str = "groups",
    x_name: str = "size",
    score_name: str = "",
) -> tuple[pd.DataFrame, Folded | None]:
    """The rows of at most `max_lines` groups (lines, by `key`), and the rest folded (None:
    all fit).

    Drawn: the best half and the worst half of the groups by `score` at each group's largest
    `x` (ties and groups without a score after those with one, by group id), so the spread of
    the sweep stays visible; the rest are folded. `unit`, `x_name` and `score_name` name a
    line, the x axis and the score in the note."""
    ids = list(pd.unique(cells[key]))
    if len(ids) <= max_lines:
        return cells, None
    last = cells.sort_values(x, kind="stable").groupby(key).tail(1)
    values = pd.to_numeric(last.set_index(key)[score], errors="coerce") if score in last else None
    order = pd.Series(np.nan, index=pd.Index(sorted(ids))) if values is None else values
    order = order.reindex(sorted(ids))
    ranked = order.dropna().sort_values(ascending=not higher_is_better, kind="stable")
    best, worst = max_lines - max_lines // 2, max_lines // 2
    chosen = list(dict.fromkeys([*ranked.index[:best], *ranked.index[::-1][:worst]]))
    chosen += [g for g in order.index if g not in chosen][: max(0, max_lines - len(chosen))]
    chosen = chosen[:max_lines]
    shown = cells[key].isin(chosen)
    name = score_name or score.replace("_", " ")
    top, bottom = ("highest", "lowest") if higher_is_better else ("lowest", "highest")
    ends = f"the {best} with the {top}" + (f" and the {worst} with the {bottom}" if worst else "")
    rule = f"{ends} {name} at their largest {x_name}"
    if len(ranked) < max_lines:  # too few scored to fill both ends: said as it is
        rule = (
            f"the {len(ranked)} with a value of {name} at their largest {x_name}, then the first "
            f"{len(chosen) - len(ranked)} of those without one"
        )
    folded = Folded(cells[~shown], len(ids) - len(chosen), len(ids), rule, unit, x_name)
    return cells[shown], folded


def spread_pick(
    rows: pd.DataFrame,
    metric: str,
    by: str = "axis_value",
    limit: int = MAX_BARS,
    name: str = "",
) -> tuple[pd.DataFrame, str]:
    """At most `limit` rows (in their order): at each `by` value the lowest, the median and
    the highest by `metric` (fewer when they coincide; the first row when none has a value);
    all rows when they fit. With more than limit // 3 values of `by`, at limit // 3 of them,
    evenly spaced from the smallest to the largest (never the first ones only). The note says
    what was drawn ("" when all were), naming the metric `name` (default: from its column)."""
    if len(rows) <= limit:
        return rows, ""
    if limit < 3:
        raise ValueError(f"spread_pick: limit {limit} cannot hold a lowest, median and highest")
    at = rows.reset_index(drop=True)  # positions: a repeated index label picks one row
    groups = dict(iter(at.groupby(by, sort=True)))
    sizes = spaced(list(groups), limit // 3)
    keep: list = []
    for size in sizes:
        g = groups[size].sort_values(metric, kind="stable", na_position="last")
        n = int(g[metric].notna().sum())
        picks = [0, (n - 1) // 2, n - 1] if n else [0]
        keep += [g.index[i] for i in dict.fromkeys(picks)]
    out = rows.iloc[sorted(set(keep))]
    if len(sizes) == len(groups):
        where = "at each size"
    elif len(sizes) == 1:
        where = f"at the smallest of {len(groups)} sizes"
    else:
        where = (
            f"at {len(sizes)} of {len(groups)} sizes (evenly spaced from the smallest to the "
            "largest)"
        )
    note = (
        f"{len(out)} of {len(rows)} cells drawn: {where} the lowest, median and highest "
        f"{name or metric.replace('_', ' ')}; {FULL_TABLE}."
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
