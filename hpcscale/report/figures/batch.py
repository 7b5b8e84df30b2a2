"""Throughput against the per-rank batch size: the batch sweep's curves."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from hpcscale.core.vocab import term
from hpcscale.report import labels as lbl
from hpcscale.report.figures.style import (
    WIDTH,
    axes_grid,
    colour,
    legend_below,
    line,
    log2_x,
    new_figure,
    spread,
    styled,
)


@styled
def batch_curves(rows: pd.DataFrame) -> Figure | None:
    """Images/s against the per-rank batch: one colour per model, CPU solid, GPU dashed."""
    if rows.empty or rows["batch_per_rank"].nunique() < 2:
        return None
    keys = [p for p in lbl.CELL_PARTS if p not in ("batch_per_rank", "global_batch", "device")]
    varying = lbl.varying(rows, keys)
    models = sorted(rows["model"].unique())
    fig = new_figure(3.8, WIDTH * 0.75)
    (ax,) = axes_grid(fig)
    line_keys = ["model", "device", *[c for p in varying for c in lbl.PARTS[p][0]]]
    for _, g in rows.groupby(list(dict.fromkeys(line_keys)), sort=True, dropna=False):
        g = g.sort_values("batch_per_rank")
        first = g.iloc[0]
        gpu = first["device"] == "gpu"
        extra = lbl.describe(first, [p for p in varying if p != "model"])
        name = f"{first['model']}, {str(first['device']).upper()}" + (f", {extra}" if extra else "")
        line(
            ax,
            g["batch_per_rank"],
            g["images_per_s"],
            spread(g, "images_per_s"),
            color=colour(models.index(first["model"])),
            ls="--" if gpu else "-",
            marker="s" if gpu else "o",
            label=name,
        )
    log2_x(ax, rows["batch_per_rank"])
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput against batch size (CPU solid, GPU dashed)")
    ax.set_xlabel("Batch size per rank (images)")
    ax.set_ylabel(term("images_per_s").heading)
    legend_below(ax, ncols=2)
    return fig
