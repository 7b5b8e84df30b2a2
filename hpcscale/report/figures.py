"""The report's figures, drawn for print: units on every axis, a legend outside the data,
constrained layout so nothing overlaps, one colour per group across a figure.

Each function takes analysis frames and returns a matplotlib Figure (no pyplot, no global
state), or None when the data has nothing to draw. `png_bytes` renders one.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.ticker import FixedLocator, NullLocator

from hpcscale.analysis.tables import strategy_name
from hpcscale.report import labels as lbl

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
P = ParamSpec("P")
PHASE_COLOURS = {"compute": "#4c72b0", "overlap": "#dd8452", "comm": "#c44e52"}


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _styled(draw: Callable[P, Figure | None]) -> Callable[P, Figure | None]:
    """Apply the print style while a figure is drawn (rcParams are read at artist creation)."""

    @functools.wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Figure | None:
        with matplotlib.rc_context(RC):
            return draw(*args, **kwargs)

    return wrapper


def _figure(height: float, width: float = WIDTH) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _axes(fig: Figure, nrows: int = 1, ncols: int = 1) -> list[Axes]:
    grid = fig.subplots(nrows, ncols, squeeze=False)
    return [ax for row in grid for ax in row]


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _axis_title(axis: str) -> str:
    return AXIS_TITLES.get(axis, axis)


def _log2_x(ax: Axes, values: Sequence[float]) -> None:
    """Powers-of-two sizes evenly spaced, ticks only where there is data, plain numbers."""
    ticks = sorted({float(v) for v in values if np.isfinite(v) and v > 0})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    if len(ticks) == 1:
        ax.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)
    else:
        ax.set_xlim(ticks[0] / 1.25, ticks[-1] * 1.25)


def _legend_below(ax: Axes, ncols: int = 1, last: str = "") -> None:
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


def _spread(rows: pd.DataFrame, metric: str) -> np.ndarray | None:
    """Repeat min/max as error bars, or None when no cell was repeated."""
    lo, hi = f"{metric}_min", f"{metric}_max"
    if lo not in rows.columns or rows.get("repeats", pd.Series([1])).max() <= 1:
        return None
    y = rows[metric].to_numpy(float)
    return np.vstack([y - rows[lo].to_numpy(float), rows[hi].to_numpy(float) - y])


def _line(ax: Axes, x: Any, y: Any, yerr: np.ndarray | None, **kw: Any) -> None:
    """A plain line (its Line2D carries the label) unless there is a repeat spread to show."""
    if yerr is None:
        ax.plot(x, y, **kw)
    else:
        ax.errorbar(x, y, yerr=yerr, capsize=3, **kw)


def scaled_groups(cells: pd.DataFrame) -> pd.DataFrame:
    """Weak/strong cells of groups measured at two sizes or more (the ones a line can show)."""
    scaled = cells[cells["scaling"].isin(["weak", "strong"])]
    sizes = scaled.groupby("group")["axis_value"].transform("nunique")
    return scaled[sizes >= 2]


@_styled
def throughput(cells: pd.DataFrame) -> Figure | None:
    """Images/s against the scaled axis, one panel per scaling mode, each group with its ideal
    (linear from the group's baseline) as a dashed line of the same colour."""
    scaled = scaled_groups(cells)
    modes = [m for m in ("weak", "strong") if (scaled["scaling"] == m).any()]
    if not modes:
        return None
    names = lbl.group_labels(scaled, scaling_parts=False)
    colours = {g: _colour(i) for i, g in enumerate(sorted(names))}
    fig = _figure(3.6 + 0.25 * len(names), WIDTH if len(modes) > 1 else WIDTH * 0.75)
    for ax, mode in zip(_axes(fig, 1, len(modes)), modes, strict=True):
        sub = scaled[scaled["scaling"] == mode]
        for gid, g in sub.groupby("group", sort=True):
            g = g.sort_values("axis_value")
            x = g["axis_value"].to_numpy(float)
            _line(
                ax,
                x,
                g["images_per_s"],
                _spread(g, "images_per_s"),
                marker="o",
                color=colours[gid],
                label=names[gid],
            )
            ideal = (g["base_images_per_s"] * g["scale"]).to_numpy(float)
            ax.plot(x, ideal, ls="--", lw=1.2, color=colours[gid])
        ax.plot([], [], ls="--", color="0.35", label="ideal (linear from the baseline)")
        _log2_x(ax, sub["axis_value"])
        ax.set_ylim(bottom=0)
        ax.set_title(f"{mode.capitalize()} scaling")
        ax.set_xlabel(_axis_title(str(sub["axis"].iloc[0])))
        ax.set_ylabel("Throughput (images/s)")
        _legend_below(ax, last="ideal")
    return fig


@_styled
def efficiency(cells: pd.DataFrame) -> Figure | None:
    """Scaling efficiency per strategy (strong: on time, weak: on throughput); 1 is ideal."""
    scaled = scaled_groups(cells)
    if scaled.empty:
        return None
    names = lbl.group_labels(scaled)
    fig = _figure(3.6 + 0.25 * len(names), WIDTH * 0.75)
    (ax,) = _axes(fig)
    for i, (gid, g) in enumerate(scaled.groupby("group", sort=True)):
        g = g.sort_values("axis_value")
        first = g.iloc[0]
        strat = strategy_name(first["strategy"], first["cross_device_ops"], first["mpi"])
        name = names[gid] if strat in names[gid] else f"{strat}: {names[gid]}"
        ax.plot(g["axis_value"], g["efficiency"], marker="o", color=_colour(i), label=name)
    ax.axhline(1.0, ls="--", color="0.35", lw=1.2, label="ideal (efficiency 1)")
    _log2_x(ax, scaled["axis_value"])
    top = float(np.nanmax(scaled["efficiency"].to_numpy(float), initial=1.0))
    ax.set_ylim(0, max(1.1, top * 1.1))
    ax.set_title("Scaling efficiency per strategy")
    ax.set_xlabel(_axis_title(str(scaled["axis"].iloc[0])))
    ax.set_ylabel("Efficiency (1 = linear scaling)")
    _legend_below(ax, last="ideal")
    return fig


@_styled
def overlap_bars(cells: pd.DataFrame) -> Figure | None:
    """Per run (cell): compute only / overlap / communication only, seconds per epoch, stacked
    so a bar is the epoch time; a second panel with the exact (step-span) view when measured."""
    timed = cells[cells["comm_s"].notna()].sort_values(["group", "axis_value"], kind="stable")
    if timed.empty:
        return None
    names = lbl.labels(timed, lbl.CELL_PARTS)
    exact = all(c in timed.columns for c in ("exact_compute_s", "exact_overlap_s"))
    exact = exact and bool(timed["exact_compute_s"].notna().any())
    views = [
        (
            "Timeline totals (the seed reports' arithmetic)",
            timed["compute_s"],
            timed["comm_s"] - timed["only_comm_s"],
            timed["only_comm_s"],
        )
    ]
    if exact:
        views.append(
            (
                "Exact (step spans against the timeline)",
                timed["exact_compute_s"],
                timed["exact_overlap_s"],
                timed["exact_exposed_comm_s"],
            )
        )
    fig = _figure(1.6 + 0.4 * len(timed) * len(views) + 0.4)
    y = np.arange(len(timed))
    axes = _axes(fig, len(views), 1)
    for ax, (title, comp, ovl, comm) in zip(axes, views, strict=True):
        left = np.zeros(len(timed))
        for part, values, colour in (
            ("Computation only", comp, PHASE_COLOURS["compute"]),
            ("Overlap (compute and communication)", ovl, PHASE_COLOURS["overlap"]),
            ("Communication only", comm, PHASE_COLOURS["comm"]),
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
    handles, parts = axes[0].get_legend_handles_labels()
    fig.legend(handles, parts, loc="outside lower center", ncols=3, frameon=False)
    return fig


@_styled
def fusion_heatmap(cells: pd.DataFrame) -> Figure | None:
    """Cycle time x fusion buffer of epoch time (and of communication-only share when a
    timeline was collected), one panel per model and device."""
    from hpcscale.analysis.tables import fusion_grid

    rows = cells[cells["fusion_threshold_mb"].notna() & cells["cycle_time_ms"].notna()]
    if rows.empty:
        return None
    values = [("epoch_time_s", "Epoch time (s)", "viridis")]
    if rows["only_comm_pct"].notna().any():
        values.append(("only_comm_pct", "Communication only (% of epoch)", "magma_r"))
    panels = list(rows.groupby(["model", "device"], sort=True))
    nx = rows["fusion_threshold_mb"].nunique()
    fig = _figure(
        (1.2 + 0.45 * rows["cycle_time_ms"].nunique()) * len(panels),
        min(WIDTH * 1.3, max(WIDTH * 0.75, (1.8 + 0.75 * nx) * len(values))),
    )
    axes = _axes(fig, len(panels), len(values))
    k = 0
    for (model, device), sub in panels:
        for metric, title, cmap in values:
            ax = axes[k]
            k += 1
            grid = fusion_grid(sub, metric)
            data = grid.to_numpy(float)
            im = ax.imshow(data, cmap=cmap, aspect="auto")
            ax.set_xticks(range(grid.shape[1]), [f"{v:g}" for v in grid.columns])
            ax.set_yticks(range(grid.shape[0]), [f"{v:g}" for v in grid.index])
            ax.set_xlabel("Fusion buffer (MB)")
            ax.set_ylabel("Cycle time (ms)")
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


@_styled
def batch_curves(rows: pd.DataFrame) -> Figure | None:
    """Images/s against the per-rank batch: one colour per model, CPU solid, GPU dashed."""
    if rows.empty or rows["batch_per_rank"].nunique() < 2:
        return None
    keys = [p for p in lbl.CELL_PARTS if p not in ("batch_per_rank", "global_batch", "device")]
    varying = lbl.varying(rows, keys)
    models = sorted(rows["model"].unique())
    fig = _figure(3.8, WIDTH * 0.75)
    (ax,) = _axes(fig)
    line_keys = ["model", "device", *[c for p in varying for c in lbl.PARTS[p][0]]]
    for _, g in rows.groupby(list(dict.fromkeys(line_keys)), sort=True, dropna=False):
        g = g.sort_values("batch_per_rank")
        first = g.iloc[0]
        gpu = first["device"] == "gpu"
        extra = lbl.describe(first, [p for p in varying if p != "model"])
        name = f"{first['model']}, {str(first['device']).upper()}" + (f", {extra}" if extra else "")
        _line(
            ax,
            g["batch_per_rank"],
            g["images_per_s"],
            _spread(g, "images_per_s"),
            color=_colour(models.index(first["model"])),
            ls="--" if gpu else "-",
            marker="s" if gpu else "o",
            label=name,
        )
    _log2_x(ax, rows["batch_per_rank"])
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput against batch size (CPU solid, GPU dashed)")
    ax.set_xlabel("Batch size per rank (images)")
    ax.set_ylabel("Throughput (images/s)")
    _legend_below(ax, ncols=2)
    return fig


@_styled
def time_to_target(per_run: pd.DataFrame, loss_name: str, target: float | None) -> Figure | None:
    """Wall time to the target loss (and to the accuracy plateau) against ranks, medians of
    repeats, one line per model/device/batch."""
    values = [
        ("time_to_target_s", f"To {loss_name} ≤ {target:.3g}" if target is not None else ""),
        ("time_to_plateau_s", "To the val. accuracy plateau"),
    ]
    values = [(c, t) for c, t in values if c in per_run.columns and per_run[c].notna().any()]
    if per_run.empty or not values:
        return None
    keys = ["model", "device", "batch_per_rank", "ranks"]
    med = per_run.groupby(keys, sort=True)[[c for c, _ in values]].median().reset_index()
    line_parts = lbl.varying(med, ["model", "device", "batch_per_rank"])
    fig = _figure(3.8, WIDTH if len(values) > 1 else WIDTH * 0.75)
    for ax, (col, title) in zip(_axes(fig, 1, len(values)), values, strict=True):
        for i, (_, g) in enumerate(med.groupby(keys[:3], sort=True)):
            g = g.sort_values("ranks")
            name = lbl.describe(g.iloc[0], line_parts) or str(g.iloc[0]["model"])
            ax.plot(g["ranks"], g[col], marker="o", color=_colour(i), label=name)
        _log2_x(ax, med["ranks"])
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.set_xlabel(_axis_title("ranks"))
        ax.set_ylabel("Wall time from start (s)")
        _legend_below(ax)
    return fig


@_styled
def extrapolation(cells: pd.DataFrame, curve: pd.DataFrame, points: pd.DataFrame) -> Figure | None:
    """Measured cells, the fitted law through them and beyond, its prediction interval as a band,
    and the predicted sizes as open markers: everything past the data is labelled a prediction.

    `curve` and `points` are `extrapolate()` frames on a dense grid and at the asked sizes."""
    if points.empty:
        return None
    laws = [law for law in ("amdahl", "gustafson") if (points["law"] == law).any()]
    per_law = 4.2 + 0.5 * points["group"].nunique()
    fig = _figure(per_law * len(laws), WIDTH)
    names = lbl.group_labels(cells[cells["group"].isin(points["group"])])
    for ax, law in zip(_axes(fig, len(laws), 1), laws, strict=True):
        pts = points[points["law"] == law]
        metric = str(pts["metric"].iloc[0])
        level = float(pts["level"].iloc[0])
        for i, gid in enumerate(sorted(pts["group"].unique())):
            colour = _colour(i)
            measured = cells[cells["group"] == gid].sort_values("axis_value")
            ax.plot(
                measured["axis_value"],
                measured[metric],
                "o",
                color=colour,
                label=f"{names.get(gid, gid)}: measured",
            )
            c = curve[curve["group"] == gid].sort_values("axis_value")
            ax.plot(
                c["axis_value"],
                c["predicted"],
                "--",
                color=colour,
                label=f"{names.get(gid, gid)}: {law.capitalize()} fit (prediction)",
            )
            ok = np.isfinite(c["lower"].to_numpy(float)) & np.isfinite(c["upper"].to_numpy(float))
            if ok.any():
                ax.fill_between(
                    c["axis_value"][ok],
                    c["lower"][ok],
                    c["upper"][ok],
                    color=colour,
                    alpha=0.18,
                    lw=0,
                )
            p = pts[pts["group"] == gid]
            err = np.vstack([p["predicted"] - p["lower"], p["upper"] - p["predicted"]])
            ax.errorbar(
                p["axis_value"],
                p["predicted"],
                yerr=None if not np.isfinite(err).all() else err,
                fmt="o",
                mfc="white",
                color=colour,
                capsize=4,
            )
        if curve[["lower", "upper"]].notna().any().any():
            ax.fill_between(
                [], [], [], color="0.5", alpha=0.25, label=f"{level:.0%} prediction interval"
            )
        ax.plot([], [], "o", mfc="white", color="0.35", label="predicted size (not measured)")
        measured_sizes = cells[cells["group"].isin(pts["group"])]["axis_value"]
        sizes = np.concatenate([measured_sizes, pts["axis_value"]])
        _log2_x(ax, sizes)
        edge = float(np.sqrt(measured_sizes.max() * pts["axis_value"].min()))
        ax.axvspan(edge, ax.get_xlim()[1], color="0.92", zorder=0, lw=0)
        ax.text(
            edge,
            0.98,
            "  predictions →",
            transform=ax.get_xaxis_transform(),
            va="top",
            ha="left",
            fontsize=9,
            color="0.3",
        )
        ax.set_ylim(bottom=0)
        unit = "s" if metric == "epoch_time_s" else "images/s"
        what = "Epoch time" if metric == "epoch_time_s" else "Throughput"
        ax.set_title(f"{what}: {law.capitalize()} extrapolation (prediction)")
        odd = pts.groupby("group")["serial_fraction"].first()
        odd = odd[(odd < 0) | (odd > 1)]
        if len(odd):
            ax.text(
                0.98,
                0.88,
                "serial fraction outside 0..1 for "
                + ", ".join(names.get(g, str(g)) for g in odd.index)
                + ":\nthe law does not describe these measurements",
                transform=ax.transAxes,
                va="top",
                ha="right",
                fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "0.6", "alpha": 0.9},
            )
        ax.set_xlabel(_axis_title(str(pts["axis"].iloc[0])))
        ax.set_ylabel(f"{what} ({unit})")
        _legend_below(ax, ncols=2)
    return fig
