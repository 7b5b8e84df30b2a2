"""The print style every figure shares: size, palette, fonts, log-2 size axes, legends below the
data, repeat spreads and intervals as error bars (named in the legend). Figures are plain
`Figure`s (no pyplot, no global state)."""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec

import numpy as np
import pandas as pd

from hpcscale.report.figures import reuse

if TYPE_CHECKING:  # matplotlib is imported when a figure is built: a reused one builds none
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

DPI = 150
WIDTH = 7.0  # inches: a page's text width at a readable font size
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
AXIS_TITLES = {"nodes": "Nodes", "ranks": "Ranks (MPI processes)", "gpus": "GPUs"}
PHASE_COLOURS = {"compute": "#4c72b0", "overlap": "#dd8452", "comm": "#c44e52"}
P = ParamSpec("P")


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def styled(draw: Callable[P, Figure | None]) -> Callable[P, Figure | None]:
    """Apply the print style while a figure is drawn (rcParams are read at artist creation);
    while a report is built `reuse.reusing` its previous figures, a call with the inputs of
    one of them returns that one (a `reuse.ReusedFigure`: no Figure is built)."""

    @functools.wraps(draw)
    def in_style(*args: P.args, **kwargs: P.kwargs) -> Figure | None:
        import matplotlib

        with matplotlib.rc_context(RC):
            return draw(*args, **kwargs)

    @functools.wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Figure | None:
        return reuse.reused_or_drawn(in_style, args, kwargs, DPI)  # type: ignore[return-value]

    return wrapper


def new_figure(height: float, width: float = WIDTH) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def axes_grid(fig: Figure, nrows: int = 1, ncols: int = 1) -> list[Axes]:
    grid = fig.subplots(nrows, ncols, squeeze=False)
    return [ax for row in grid for ax in row]


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def axis_title(axis: str) -> str:
    return AXIS_TITLES.get(axis, axis)


def log2_x(ax: Axes, values: Sequence[float]) -> None:
    """Powers-of-two sizes evenly spaced, ticks only where there is data, plain numbers."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ticks = sorted({float(v) for v in values if np.isfinite(v) and v > 0})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    if len(ticks) == 1:
        ax.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)
    else:
        ax.set_xlim(ticks[0] / 1.25, ticks[-1] * 1.25)


def legend_below(ax: Axes, ncols: int = 1, last: str = "") -> None:
    """Legend under the axes (never over data); entries starting with `last` go at the end."""
    handles, names = ax.get_legend_handles_labels()
    if last:
        order = sorted(range(len(names)), key=lambda i: names[i].startswith(last))
        handles, names = [handles[i] for i in order], [names[i] for i in order]
    if handles:
        ax.legend(
            handles,
            names,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncols=ncols,
            frameon=False,
        )


def spread(rows: pd.DataFrame, metric: str) -> np.ndarray | None:
    """Repeat min/max as error bars, or None when no cell was repeated."""
    lo, hi = f"{metric}_min", f"{metric}_max"
    if lo not in rows.columns or rows.get("repeats", pd.Series([1])).max() <= 1:
        return None
    y = rows[metric].to_numpy(float)
    return np.vstack([y - rows[lo].to_numpy(float), rows[hi].to_numpy(float) - y])


def interval_bounds(rows: pd.DataFrame, metric: str) -> np.ndarray | None:
    """The interval (`<metric>_lo`/`_hi`, analysis.intervals) as a (2, n) array of its ends,
    NaN where a row has none; None when no row has one (no repeats). Its ends, not offsets from
    the point: a speedup's interval (of the geometric means) need not contain the medians'
    ratio drawn, and is drawn as it is."""
    lo, hi = f"{metric}_lo", f"{metric}_hi"
    if lo not in rows.columns or not rows[lo].notna().any():
        return None
    return np.vstack([rows[lo].to_numpy(float), rows[hi].to_numpy(float)])


def line(
    ax: Axes, x: Any, y: Any, yerr: np.ndarray | None, bounds: np.ndarray | None = None, **kw: Any
) -> None:
    """A plain line (its Line2D carries the label), with the repeats' spread (`yerr`, offsets
    from y) or an interval (`bounds`, its ends: `interval_bounds`) as error bars."""
    if bounds is not None:
        ax.plot(x, y, **kw)
        mid, half = (bounds[0] + bounds[1]) / 2.0, (bounds[1] - bounds[0]) / 2.0
        ax.errorbar(x, mid, yerr=half, fmt="none", ecolor=kw.get("color"), capsize=3)
    elif yerr is None:
        ax.plot(x, y, **kw)
    else:
        ax.errorbar(x, y, yerr=yerr, capsize=3, **kw)


def bars_entry(label: str) -> Line2D:
    """A legend entry naming what the error bars are (method and level)."""
    from matplotlib.lines import Line2D

    return Line2D([], [], ls="none", marker="|", markersize=12, color="0.35", label=label)


def name_bars(ax: Axes, label: str | None) -> None:
    """Add the error bars' name to the axes' legend (nothing when there are no bars)."""
    if label:
        ax.add_line(bars_entry(label))
