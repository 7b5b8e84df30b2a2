"""Wall time to a training target (a loss, or the validation-accuracy plateau) against ranks."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from hpcscale.analysis.targets import target_lines
from hpcscale.report import labels as lbl
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


@styled
def time_to_target(cells: pd.DataFrame, loss_name: str, target: float | None) -> Figure | None:
    """Wall time to the target loss (and to the accuracy plateau) against ranks, one point per
    cell of `targets.fold_targets` (median of its repeats), one line per `targets.target_lines`
    (cells that differ only in scale), so two strategies or knob settings never merge."""
    values = [
        ("time_to_target_s", f"To {loss_name} ≤ {target:.3g}" if target is not None else ""),
        ("time_to_plateau_s", "To the val. accuracy plateau"),
    ]
    values = [(c, t) for c, t in values if c in cells.columns and cells[c].notna().any()]
    if cells.empty or not values:
        return None
    cells = cells.assign(group=target_lines(cells))
    names = lbl.group_labels(cells)
    fig = new_figure(3.8, WIDTH if len(values) > 1 else WIDTH * 0.75)
    for ax, (col, title) in zip(axes_grid(fig, 1, len(values)), values, strict=True):
        for i, (gid, g) in enumerate(cells.groupby("group", sort=True)):
            g = g.sort_values("ranks", kind="stable")
            ax.plot(g["ranks"], g[col], marker="o", color=colour(i), label=names[gid])
        log2_x(ax, cells["ranks"])
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.set_xlabel(axis_title("ranks"))
        ax.set_ylabel("Wall time from start (s)")
        legend_below(ax)
    return fig
