"""Wall time to a training target (a loss, or the validation-accuracy plateau) against ranks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from hpcscale.analysis.targets import target_lines
from hpcscale.report import labels as lbl
from hpcscale.report.figures.fold import fold_groups, with_note
from hpcscale.report.figures.style import (
    WIDTH,
    axes_grid,
    axis_title,
    colour,
    legend_below,
    log2_x,
    new_figure,
    styled,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WHAT = {"time_to_target_s": "time to the target", "time_to_plateau_s": "time to the plateau"}


@styled
def time_to_target(cells: pd.DataFrame) -> Figure | None:
    """Wall time to each target (a panel per target; the plateau is one) against ranks, one
    point per cell of `targets.fold_targets` (median of its repeats), one line per
    `targets.target_lines` (cells that differ only in scale), so two strategies or knob
    settings never merge. Past MAX_LINES lines a panel draws the fastest and the slowest and
    folds the rest into a band (figures.fold), said in the note."""
    if cells.empty:
        return None
    if "target" not in cells.columns:
        cells = cells.assign(target="target")
    panels = []
    for name, sub in cells.groupby("target", sort=True):
        for col, title in (
            ("time_to_target_s", f"To {name}"),
            ("time_to_plateau_s", "To the val. accuracy plateau"),
        ):
            if col in sub.columns and sub[col].notna().any():
                panels.append((sub, col, title))
    if not panels:
        return None
    fig = new_figure(3.8, WIDTH if len(panels) > 1 else WIDTH * 0.75)
    for ax, (sub, col, title) in zip(axes_grid(fig, 1, len(panels)), panels, strict=True):
        every = sub = sub.assign(group=target_lines(sub))
        sub = sub[sub.groupby("group")[col].transform("count").to_numpy() > 0]  # a line to draw
        sub, folded = fold_groups(
            sub, col, False, x="ranks", unit="lines", x_name="rank count", score_name=WHAT[col]
        )
        names = lbl.group_labels(sub)
        for i, (gid, g) in enumerate(sub.groupby("group", sort=True)):
            g = g.sort_values("ranks", kind="stable")
            ax.plot(g["ranks"], g[col], marker="o", color=colour(i), label=names[gid])
        if folded is not None:  # past MAX_LINES: the extremes drawn, the rest a band
            folded.band(ax, col, x="ranks")
            with_note(fig, f"{title}: {folded.note()}" if len(panels) > 1 else folded.note())
        log2_x(ax, every["ranks"])
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.set_xlabel(axis_title("ranks"))
        ax.set_ylabel("Wall time from start (s)")
        legend_below(ax)
    return fig
