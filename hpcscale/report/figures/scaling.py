"""Figures of scaling groups: throughput and efficiency against the scaled axis, and the fitted
laws extrapolated past the measurements (always marked as predictions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hpcscale.analysis.intervals import short_label
from hpcscale.analysis.strategies import strategy_of
from hpcscale.analysis.sweeps import scaled_groups
from hpcscale.model.scaling_metric import BUNDLED_METRIC, ScalingMetric
from hpcscale.model.vocab import term
from hpcscale.report import labels as lbl
from hpcscale.report.figures.fold import fold_groups, with_note
from hpcscale.report.figures.style import (
    WIDTH,
    axes_grid,
    axis_title,
    colour,
    interval_bounds,
    legend_below,
    line,
    log2_x,
    name_bars,
    new_figure,
    spread,
    styled,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@styled
def throughput(
    cells: pd.DataFrame,
    metric: str = BUNDLED_METRIC.throughput_column,
    scaling: ScalingMetric = BUNDLED_METRIC,
) -> Figure | None:
    """Images/s (or the column `metric`: a command's own, a `time:` campaign's time, axis
    labelled by the campaign's `scaling` metric) against the scaled axis, one
    panel per scaling mode, each group with its ideal (linear from the group's baseline; for a
    time, the baseline's time / scale) as a dashed line of the same colour; past MAX_LINES
    groups in a panel the others are folded into a band (figures.fold)."""
    scaled = scaled_groups(cells)
    modes = [m for m in ("weak", "strong") if (scaled["scaling"] == m).any()]
    if not modes:
        return None
    folds = {m: fold_groups(scaled[scaled["scaling"] == m]) for m in modes}
    every = scaled
    scaled = pd.concat([rows for rows, _ in folds.values()])
    names = lbl.group_labels(scaled, scaling_parts=False)
    colours = {g: colour(i) for i, g in enumerate(sorted(names))}
    fig = new_figure(3.6 + 0.25 * len(names), WIDTH if len(modes) > 1 else WIDTH * 0.75)
    for ax, mode in zip(axes_grid(fig, 1, len(modes)), modes, strict=True):
        sub = scaled[scaled["scaling"] == mode]
        for gid, g in sub.groupby("group", sort=True):
            g = g.sort_values("axis_value")
            x = g["axis_value"].to_numpy(float)
            bounds = interval_bounds(g, metric)
            line(
                ax,
                x,
                g[metric],
                spread(g, metric) if bounds is None else None,
                bounds,
                marker="o",
                color=colours[gid],
                label=names[gid],
            )
            base, scale = g[f"base_{metric}"].to_numpy(float), g["scale"].to_numpy(float)
            ideal = base / scale if metric == scaling.time_column else base * scale
            ax.plot(x, ideal, ls="--", lw=1.2, color=colours[gid])
        if (folded := folds[mode][1]) is not None:
            folded.band(ax, metric)
            with_note(fig, f"{mode.capitalize()} scaling: {folded.note()}")
        ax.plot([], [], ls="--", color="0.35", label="ideal (linear from the baseline)")
        name_bars(ax, _bars_name(sub, metric))
        log2_x(ax, every[every["scaling"] == mode]["axis_value"])
        ax.set_ylim(bottom=0)
        ax.set_title(f"{mode.capitalize()} scaling")
        ax.set_xlabel(axis_title(str(sub["axis"].iloc[0])))
        ax.set_ylabel(scaling.axis_of(metric) or term(metric).heading)
        legend_below(ax, last="ideal")
    return fig


@styled
def efficiency(cells: pd.DataFrame) -> Figure | None:
    """Scaling efficiency per strategy (strong: on time, weak: on throughput); 1 is ideal. Below
    it, when a strong-scaling group has one, the Karp–Flatt serial fraction (same colours).
    Past MAX_LINES groups the others are folded into a band (figures.fold)."""
    scaled = scaled_groups(cells)
    if scaled.empty:
        return None
    every = scaled
    scaled, folded = fold_groups(scaled)
    names = lbl.group_labels(scaled)
    kf = scaled["karp_flatt"] if "karp_flatt" in scaled.columns else pd.Series(dtype=float)
    serial = bool(np.isfinite(kf.to_numpy(float)).any())
    fig = new_figure((3.6 + 0.25 * len(names)) * (1.9 if serial else 1), WIDTH * 0.75)
    axes = axes_grid(fig, 2 if serial else 1, 1)
    ax = axes[0]
    labels: dict[int, tuple[str, str]] = {}
    for i, (gid, g) in enumerate(scaled.groupby("group", sort=True)):
        g = g.sort_values("axis_value")
        first = g.iloc[0]
        strat = strategy_of(first)
        name = names[gid] if strat in names[gid] else f"{strat}: {names[gid]}"
        labels[gid] = (name, colour(i))
        line(
            ax,
            g["axis_value"],
            g["efficiency"],
            None,
            interval_bounds(g, "efficiency"),
            marker="o",
            color=colour(i),
            label=name,
        )
    if folded is not None:
        folded.band(ax, "efficiency")
        with_note(fig, folded.note())
    ax.axhline(1.0, ls="--", color="0.35", lw=1.2, label="ideal (efficiency 1)")
    name_bars(ax, _bars_name(scaled, "efficiency"))
    log2_x(ax, every["axis_value"])
    top = float(np.nanmax(every["efficiency"].to_numpy(float), initial=1.0))
    ax.set_ylim(0, max(1.1, top * 1.1))
    ax.set_title("Scaling efficiency per strategy")
    ax.set_xlabel(axis_title(str(scaled["axis"].iloc[0])))
    ax.set_ylabel("Efficiency (1 = linear scaling)")
    legend_below(ax, last="ideal")
    if serial:
        _karp_flatt(axes[1], scaled, labels)
    return fig


def _bars_name(rows: pd.DataFrame, metric: str) -> str | None:
    """The legend's name for a panel's error bars: the interval's method and level, or the
    repeats' range where no cell has an interval."""
    said = short_label(rows, metric)
    if said is None and spread(rows, metric) is not None:
        return "error bars: min to max of the repeats (a range, not an interval)"
    return None if said is None else f"error bars: {said}"


def _karp_flatt(ax: Axes, scaled: pd.DataFrame, labels: dict[int, tuple[str, str]]) -> None:
    """The Karp–Flatt serial fraction of each strong-scaling group, beyond its baseline only."""
    defined = scaled[np.isfinite(scaled["karp_flatt"].to_numpy(float))]
    for gid, g in defined.groupby("group", sort=True):
        g = g.sort_values("axis_value")
        name, col = labels[gid]
        ax.plot(g["axis_value"], g["karp_flatt"], marker="s", color=col, label=name)
    log2_x(ax, scaled["axis_value"])
    lo = float(np.nanmin(defined["karp_flatt"].to_numpy(float), initial=0.0))
    hi = float(np.nanmax(defined["karp_flatt"].to_numpy(float), initial=0.0))
    ax.set_ylim(min(0.0, lo * 1.15), max(0.1, hi * 1.15))
    ax.set_title("Karp–Flatt serial fraction (strong scaling)")
    ax.set_xlabel(axis_title(str(scaled["axis"].iloc[0])))
    ax.set_ylabel("Serial fraction e (0 = none)\nN = scale relative to the baseline")
    legend_below(ax)


@styled
def extrapolation(
    cells: pd.DataFrame,
    curve: pd.DataFrame,
    points: pd.DataFrame,
    scaling: ScalingMetric = BUNDLED_METRIC,
) -> Figure | None:
    """Measured cells, the fitted law through them and beyond, its prediction interval as a band,
    and the predicted sizes as open markers: everything past the data is labelled a prediction.

    `curve` and `points` are `extrapolate()` frames on a dense grid and at the asked sizes."""
    if points.empty:
        return None
    shown, folded = fold_groups(cells[cells["group"].isin(points["group"])])
    if folded is not None:  # too many groups to tell apart: the extremes, the rest in the table
        points = points[points["group"].isin(shown["group"])]
        curve = curve[curve["group"].isin(shown["group"])]
    laws = [law for law in ("amdahl", "gustafson") if (points["law"] == law).any()]
    per_law = 4.2 + 0.5 * points["group"].nunique()
    fig = new_figure(per_law * len(laws), WIDTH)
    names = lbl.group_labels(cells[cells["group"].isin(points["group"])])
    for ax, law in zip(axes_grid(fig, len(laws), 1), laws, strict=True):
        pts = points[points["law"] == law]
        metric = str(pts["metric"].iloc[0])
        level = float(pts["level"].iloc[0])
        for i, gid in enumerate(sorted(pts["group"].unique())):
            _law_group(ax, cells, curve, pts, gid, names.get(gid, str(gid)), law, colour(i))
        if curve[["lower", "upper"]].notna().any().any():
            ax.fill_between(
                [], [], [], color="0.5", alpha=0.25, label=f"{level:.0%} prediction interval (t)"
            )
        ax.plot([], [], "o", mfc="white", color="0.35", label="predicted size (not measured)")
        measured_sizes = cells[cells["group"].isin(pts["group"])]["axis_value"]
        sizes = np.concatenate([measured_sizes, pts["axis_value"]])
        log2_x(ax, sizes)
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
        limits = pts.get("system_limit", pd.Series(dtype=float)).astype(float)
        if np.isfinite(limits).any():
            ax.axvline(
                float(limits[np.isfinite(limits)].min()),
                ls=":",
                color="0.2",
                label="system's max_nodes (beyond: not measurable there)",
            )
        ax.set_ylim(bottom=0)
        said = (
            scaling.time_name
            if metric == scaling.time_column
            else "Throughput"
            if metric == scaling.throughput_column
            else term(metric).label
        )
        ax.set_title(f"{said}: {law.capitalize()} extrapolation (prediction)")
        ax.set_xlabel(axis_title(str(pts["axis"].iloc[0])))
        ax.set_ylabel(scaling.axis_of(metric) or term(metric).heading)
        legend_below(ax, ncols=2)
    if folded is not None:
        with_note(fig, folded.note(band=False))
    return fig


def _law_group(
    ax: Axes,
    cells: pd.DataFrame,
    curve: pd.DataFrame,
    pts: pd.DataFrame,
    gid: int,
    name: str,
    law: str,
    col: str,
) -> None:
    """One group of an extrapolation panel: measured points, fitted curve, band, predictions."""
    metric = str(pts["metric"].iloc[0])
    measured = cells[cells["group"] == gid].sort_values("axis_value")
    ax.plot(measured["axis_value"], measured[metric], "o", color=col, label=f"{name}: measured")
    c = curve[curve["group"] == gid].sort_values("axis_value")
    ax.plot(
        c["axis_value"],
        c["predicted"],
        "--",
        color=col,
        label=f"{name}: {law.capitalize()} fit (prediction)",
    )
    ok = np.isfinite(c["lower"].to_numpy(float)) & np.isfinite(c["upper"].to_numpy(float))
    if ok.any():
        ax.fill_between(
            c["axis_value"][ok], c["lower"][ok], c["upper"][ok], color=col, alpha=0.18, lw=0
        )
    p = pts[pts["group"] == gid]
    err = np.vstack([p["predicted"] - p["lower"], p["upper"] - p["predicted"]])
    ax.errorbar(
        p["axis_value"],
        p["predicted"],
        yerr=None if not np.isfinite(err).all() else err,
        fmt="o",
        mfc="white",
        color=col,
        capsize=4,
    )
