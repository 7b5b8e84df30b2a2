"""Figures of where an epoch's time goes: compute / overlap / communication bars per cell, and
the tensor-fusion heat map (cycle time x fusion threshold)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hpcscale.analysis.sweeps import sweep_keys, timed
from hpcscale.analysis.tables import fusion_grid
from hpcscale.model.vocab import term
from hpcscale.report import labels as lbl
from hpcscale.report.figures.fold import spaced, spread_pick, with_note
from hpcscale.report.figures.style import (
    PHASE_COLOURS,
    WIDTH,
    axes_grid,
    new_figure,
    styled,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

# Murthy's split, and the exact view named by what it measures (vocab's exact_* labels).
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
    rows, folded = spread_pick(rows, "epoch_time_s", name="epoch time")  # at most MAX_BARS bars
    names = lbl.labels(rows, lbl.CELL_PARTS)
    exact = all(c in rows.columns for c in ("exact_compute_s", "exact_overlap_s"))
    exact = exact and bool(rows["exact_compute_s"].notna().any())
    views = [
        (
            "Timeline totals (Vemparala Narayana Murthy's arithmetic)",
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
    return with_note(fig, folded)


@styled
def fusion_heatmap(cells: pd.DataFrame) -> Figure | None:
    """Cycle time x fusion buffer as heat maps: one row of panels per sweep (cells equal in
    everything but the two knobs, so one model, device and scale each: 1 and 2 ranks are two
    maps, never one median), one panel per metric (epoch time, and the communication-only share
    when a timeline was collected), the metric in colour and each cell's value written in it
    when it fits. Past MAX_FIGURES sweeps, evenly spaced ones are drawn (said in the note)."""
    rows = cells[cells["fusion_threshold_mb"].notna() & cells["cycle_time_ms"].notna()]
    if rows.empty:
        return None
    values = [("epoch_time_s", term("epoch_time_s").heading, "viridis")]
    if rows["only_comm_pct"].notna().any():
        values.append(("only_comm_pct", "Communication only (% of epoch)", "magma_r"))
    key = sweep_keys(rows, KNOB_COLUMNS)
    order = rows.sort_values(["model", "device", "axis_value", "nodes"], kind="stable")
    ids = list(dict.fromkeys(key[order.index]))
    shown = spaced(ids)
    firsts = order.loc[[key[order.index].eq(k).idxmax() for k in shown]]
    names = lbl.labels(firsts, [p for p in lbl.CELL_PARTS if p not in HEAT_KNOB_PARTS])
    nx = rows["fusion_threshold_mb"].nunique()
    ny = rows["cycle_time_ms"].nunique()
    ncols = len(values)
    width = min(WIDTH * 1.3, max(WIDTH * 0.75, (1.8 + 0.75 * nx) * ncols))
    cell_w = (width / ncols - HEAT_MARGIN_IN) / nx  # inches per heat-map cell, roughly
    cell_h = min(0.45, max(0.16, 2.2 / ny))
    fig = new_figure((1.4 + cell_h * ny) * len(shown), width)
    axes = iter(axes_grid(fig, len(shown), ncols))
    unwritten = False  # a panel too small to hold its values: said once, not once per panel
    for k, name in zip(shown, names, strict=True):
        sub = rows[key == k]
        first = sub.iloc[0]
        what = f"{first['model']}, {str(first['device']).upper()}"
        what += f", {name}" if len(shown) > 1 and name != str(first["model"]) else ""
        for metric, title, cmap in values:
            ax = next(axes)
            grid = fusion_grid(sub, metric)
            data = grid.to_numpy(float)
            im = ax.imshow(data, cmap=cmap, aspect="auto")
            _ticks(ax, [f"{v:g}" for v in grid.columns], [f"{v:g}" for v in grid.index], cell_w)
            ax.set_xlabel("Fusion buffer (MB)")  # Murthy's tables' name for the threshold
            ax.set_ylabel(term("cycle_time_ms").heading)
            ax.set_title(f"{what}: {title}", fontsize=9 if len(what) > 30 else None)
            ax.grid(False)
            unwritten |= not _annotate(ax, im, data, cell_w, cell_h)
            fig.colorbar(im, ax=ax, label=title, shrink=0.9)
    if unwritten:
        with_note(fig, UNWRITTEN)
    if len(shown) < len(ids):
        with_note(
            fig,
            f"{len(shown)} of {len(ids)} sweeps drawn (evenly spaced in model, device and "
            f"scale order); every cell of every sweep is in the section's table.",
        )
    return fig


KNOB_COLUMNS = ("fusion_threshold_mb", "cycle_time_ms")
UNWRITTEN = (
    "Values are not written in the cells (too small to hold them); they are in the section's table."
)
HEAT_KNOB_PARTS = KNOB_COLUMNS  # label parts the maps' axes already say
HEAT_MARGIN_IN = 1.5  # a panel's y label, tick labels and colour bar, roughly
HEAT_FONT = 7.0  # points: a value written in a cell


def _ticks(ax: Axes, xs: list[str], ys: list[str], cell_w: float) -> None:
    """Every column and row named when the labels fit, else every k-th (never overlapping)."""
    widest = max(len(t) for t in xs) * 0.6 * 9 / 72 + 0.05  # inches, at the 9-pt tick font
    step = max(1, int(np.ceil(widest / max(cell_w, 1e-3))))
    ax.set_xticks(range(0, len(xs), step), xs[::step])
    ystep = max(1, int(np.ceil(len(ys) / 24)))
    ax.set_yticks(range(0, len(ys), ystep), ys[::ystep])


def _annotate(
    ax: Axes, image: AxesImage, data: np.ndarray, cell_w: float = 1.0, cell_h: float = 1.0
) -> bool:
    """Each cell's value, in white on dark colours and black on light ones, when every value
    fits its cell (at HEAT_FONT points); False (nothing written) when they do not."""
    texts = [f"{v:.3g}" for v in data.ravel() if np.isfinite(v)]
    if not texts:
        return True
    widest = max(map(len, texts)) * 0.6 * HEAT_FONT / 72  # inches
    tall = 1.3 * HEAT_FONT / 72
    if widest > 0.9 * cell_w or tall > 0.9 * cell_h:
        return False
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
            fontsize=HEAT_FONT,
            color="white" if dark else "black",
        )
    return True
