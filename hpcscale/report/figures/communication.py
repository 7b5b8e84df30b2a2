"""Figures of where an epoch's time goes: compute / overlap / communication bars per cell, and
the tensor-fusion heat map (cycle time x fusion threshold)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from hpcscale.analysis.sweeps import timed
from hpcscale.analysis.tables import fusion_grid
from hpcscale.core.vocab import term
from hpcscale.report import labels as lbl
from hpcscale.report.figures.style import (
    PHASE_COLOURS,
    WIDTH,
    axes_grid,
    new_figure,
    styled,
)

# The seed's split, and the exact view named by what it measures (vocab's exact_* labels).
PARTS = ("Computation only", "Overlap (compute and communication)", "Communication only")
EXACT_PARTS = tuple(
    term(c).label for c in ("exact_compute_s", "exact_overlap_s", "exact_exposed_comm_s")
)


@styled
def overlap_bars(cells: pd.DataFrame) -> Figure | None:
    """Per run (cell): compute only / overlap / communication only, seconds per epoch, stacked
    so a bar is the epoch time; a second panel with the exact (step-span) view when measured."""
    rows = timed(cells).sort_values(["group", "axis_value"], kind="stable")
    if rows.empty:
        return None
    names = lbl.labels(rows, lbl.CELL_PARTS)
    exact = all(c in rows.columns for c in ("exact_compute_s", "exact_overlap_s"))
    exact = exact and bool(rows["exact_compute_s"].notna().any())
    views = [
        (
            "Timeline totals (the seed reports' arithmetic)",
            rows["compute_s"],
            rows["comm_s"] - rows["only_comm_s"],
            rows["only_comm_s"],
        )
    ]
    if exact:
        views.append(
            (
                "Exact (step spans against the timeline)",
                rows["exact_compute_s"],
                rows["exact_overlap_s"],
                rows["exact_exposed_comm_s"],
            )
        )
    fig = new_figure(1.6 + 0.4 * len(rows) * len(views) + 0.4)
    y = np.arange(len(rows))
    axes = axes_grid(fig, len(views), 1)
    for n, (ax, (title, comp, ovl, comm)) in enumerate(zip(axes, views, strict=True)):
        left = np.zeros(len(rows))
        names_of = PARTS if n == 0 else EXACT_PARTS
        for part, values, colour in (
            (names_of[0], comp, PHASE_COLOURS["compute"]),
            (names_of[1], ovl, PHASE_COLOURS["overlap"]),
            (names_of[2], comm, PHASE_COLOURS["comm"]),
        ):
            width = np.clip(np.nan_to_num(values.to_numpy(float)), 0, None)
            ax.barh(y, width, left=left, color=colour, label=part, height=0.6)
            left = left + width
        ax.set_yticks(y, names)
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel("Time per epoch (s)")
        ax.set_ylabel("Matrix cell")
        ax.grid(axis="y", visible=False)
    for ax in axes:  # each view names its own parts, beside its panel
        ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False, fontsize=8)
    return fig


@styled
def fusion_heatmap(cells: pd.DataFrame) -> Figure | None:
    """Cycle time x fusion buffer of epoch time (and of communication-only share when a
    timeline was collected), one panel per model and device."""
    rows = cells[cells["fusion_threshold_mb"].notna() & cells["cycle_time_ms"].notna()]
    if rows.empty:
        return None
    values = [("epoch_time_s", term("epoch_time_s").heading, "viridis")]
    if rows["only_comm_pct"].notna().any():
        values.append(("only_comm_pct", "Communication only (% of epoch)", "magma_r"))
    panels = list(rows.groupby(["model", "device"], sort=True))
    nx = rows["fusion_threshold_mb"].nunique()
    fig = new_figure(
        (1.2 + 0.45 * rows["cycle_time_ms"].nunique()) * len(panels),
        min(WIDTH * 1.3, max(WIDTH * 0.75, (1.8 + 0.75 * nx) * len(values))),
    )
    axes = iter(axes_grid(fig, len(panels), len(values)))
    for (model, device), sub in panels:
        for metric, title, cmap in values:
            ax = next(axes)
            grid = fusion_grid(sub, metric)
            data = grid.to_numpy(float)
            im = ax.imshow(data, cmap=cmap, aspect="auto")
            ax.set_xticks(range(grid.shape[1]), [f"{v:g}" for v in grid.columns])
            ax.set_yticks(range(grid.shape[0]), [f"{v:g}" for v in grid.index])
            ax.set_xlabel("Fusion buffer (MB)")  # the seed tables' name for the threshold
            ax.set_ylabel(term("cycle_time_ms").heading)
            ax.set_title(f"{model}, {str(device).upper()}: {title}")
            ax.grid(False)
            _annotate(ax, im, data)
            fig.colorbar(im, ax=ax, label=title, shrink=0.9)
    return fig


def _annotate(ax: Axes, image: AxesImage, data: np.ndarray) -> None:
    """Each cell's value, in white on dark colours and black on light ones."""
    for (i, j), v in np.ndenumerate(data):
        if not np.isfinite(v):
            continue
        r, g, b, _ = image.cmap(image.norm(v))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
        ax.text(
            j,
            i,
            f"{v:.3g}",
            ha="center",
            va="center",
            fontsize=8,
            color="white" if dark else "black",
        )
