"""Against the batch size: throughput (the batch sweep's curves), speedup over the smallest
batch (Ahmad & Cai's Fig. 5) and time per iteration and per epoch (Goyal et al.'s Fig. 7)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hpcscale.model.scaling_metric import BUNDLED_METRIC, ScalingMetric
from hpcscale.report import labels as lbl
from hpcscale.report.figures.fold import fold_groups, with_note
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

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# How figures.fold names a batch figure's lines in its note.
BATCH_LINES: dict[str, Any] = {"x": "batch_per_rank", "unit": "lines", "x_name": "batch size"}


@styled
def batch_curves(rows: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> Figure | None:
    """Images/s (`metric`'s throughput, headed by it) against the per-rank batch: one colour
    per model (per line when a model has several), CPU solid, GPU dashed. Past MAX_LINES lines
    the fastest and the slowest are drawn and the rest folded into a band (figures.fold), said
    in the note."""
    if rows.empty or rows["batch_per_rank"].nunique() < 2:
        return None
    keys = [p for p in lbl.CELL_PARTS if p not in ("batch_per_rank", "global_batch", "device")]
    varying = lbl.varying(rows, lbl.with_args(rows, keys))  # a swept argument: lines apart
    models = sorted(rows["model"].unique())
    fig = new_figure(3.8, WIDTH * 0.75)
    (ax,) = axes_grid(fig)
    line_keys = ["model", "device", *[c for p in varying for c in lbl.part_of(p)[0]]]
    every = rows.assign(
        _line=rows.groupby(list(dict.fromkeys(line_keys)), sort=True, dropna=False).ngroup()
    )
    thr = metric.throughput_column  # named as the tables name it
    drawn, folded = fold_groups(
        every, thr, True, key="_line", score_name=metric.throughput_heading, **BATCH_LINES
    )
    by_model = drawn.groupby(["model", "device"])["_line"].nunique().max() <= 1
    for i, (_, g) in enumerate(drawn.groupby("_line", sort=True)):
        g = g.sort_values("batch_per_rank")
        first = g.iloc[0]
        gpu = first["device"] == "gpu"
        extra = lbl.describe(first, [p for p in varying if p != "model"])
        name = f"{first['model']}, {str(first['device']).upper()}" + (f", {extra}" if extra else "")
        line(
            ax,
            g["batch_per_rank"],
            g[thr],
            spread(g, thr),
            color=colour(models.index(first["model"]) if by_model else i),
            ls="--" if gpu else "-",
            marker="s" if gpu else "o",
            label=name,
        )
    if folded is not None:
        folded.band(ax, thr, x="batch_per_rank")
        with_note(fig, folded.note())
    log2_x(ax, rows["batch_per_rank"])
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput against batch size (CPU solid, GPU dashed)")
    ax.set_xlabel("Batch size per rank (images)")
    ax.set_ylabel(metric.throughput_axis)
    legend_below(ax, ncols=2)
    return fig


@styled
def batch_speedup(rows: pd.DataFrame) -> Figure | None:
    """Speedup against the per-rank batch (Ahmad & Cai's Fig. 5), one panel per measure
    (throughput, time to each target), one line per sweep; 1 = the sweep's smallest batch.
    `rows` is `analysis.batch.batch_speedups` output. Past MAX_LINES sweeps those with the
    highest and the lowest throughput speedup are drawn in every panel, the rest a band."""
    if rows.empty or rows["batch_per_rank"].nunique() < 2:
        return None
    shown = rows[rows["speedup"].notna()]
    measures = [m for m in dict.fromkeys(rows["measure"]) if (shown["measure"] == m).any()]
    if not measures:
        return None
    # the same sweeps in every panel, chosen on the first measure (throughput)
    first = rows[rows["measure"] == measures[0]]
    said = f"speedup on {measures[0]}"
    lines = {**BATCH_LINES, "unit": "sweeps", "score_name": said}
    _, folded = fold_groups(first, "speedup", True, key="sweep", **lines)
    left = set() if folded is None else set(folded.rows["sweep"])
    drawn = rows[~rows["sweep"].isin(left)]
    names = sweep_labels(drawn)
    colours = {sid: colour(i) for i, sid in enumerate(sorted(names))}
    fig = new_figure(3.4 + 0.25 * len(names), WIDTH if len(measures) > 1 else WIDTH * 0.75)
    for ax, measure in zip(axes_grid(fig, 1, len(measures)), measures, strict=True):
        sub = drawn[drawn["measure"] == measure]
        every = rows[rows["measure"] == measure]
        for sid, g in sub.groupby("sweep", sort=True):
            g = g.sort_values("batch_per_rank")
            ax.plot(
                g["batch_per_rank"], g["speedup"], marker="o", color=colours[sid], label=names[sid]
            )
        if folded is not None:
            replace(folded, rows=every[every["sweep"].isin(left)]).band(
                ax, "speedup", "batch_per_rank"
            )
        ax.axhline(1.0, ls="--", color="0.35", lw=1.0, label="smallest batch (baseline)")
        log2_x(ax, every["batch_per_rank"])
        top = float(np.nanmax(every["speedup"].to_numpy(float), initial=1.0))
        ax.set_ylim(0, max(1.2, top * 1.15))
        ax.set_title("On throughput" if measure == "throughput" else measure.capitalize())
        ax.set_xlabel("Batch size per rank (images)")
        ax.set_ylabel("Speedup (× the smallest batch)")
        legend_below(ax, last="smallest")
    if folded is not None:
        with_note(fig, folded.note())
    return fig


@styled
def iteration_times(rows: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> Figure | None:
    """Time per iteration (left) and per epoch (right) against the global batch, as Goyal et
    al.'s Fig. 7: one line per `line` of `analysis.batch.iteration_rows`. Drawn for
    three batch sizes or more (with two, the table says as much). Past MAX_LINES lines the
    fastest and the slowest epochs are drawn, the rest folded into a band (figures.fold)."""
    if rows.empty or rows.groupby("line")["global_batch"].nunique().max() < 3:
        return None
    every = rows
    lines = {**BATCH_LINES, "x": "global_batch", "x_name": "global batch"}
    time = metric.time_column  # the epoch time, or a `time:` metric's own
    rows, folded = fold_groups(rows, time, False, key="line", **lines)
    names = sweep_labels(rows, key="line")
    fig = new_figure(3.4 + 0.25 * len(names), WIDTH)
    panels = (
        ("step_time_ms", "Time per iteration", "Time per iteration (ms)"),
        (time, "Time per epoch", metric.time_heading),
    )
    for ax, (col, title, ylabel) in zip(axes_grid(fig, 1, 2), panels, strict=True):
        for i, (lid, g) in enumerate(rows.groupby("line", sort=True)):
            g = g.sort_values("global_batch")
            ax.plot(g["global_batch"], g[col], marker="o", color=colour(i), label=names[lid])
        if folded is not None:
            folded.band(ax, col, x="global_batch")
        log2_x(ax, every["global_batch"])
        ax.set_ylim(0, float(np.nanmax(every[col].to_numpy(float))) * 1.1)
        ax.set_title(title)
        ax.set_xlabel("Global batch (images)")
        ax.set_ylabel(ylabel)
        legend_below(ax)
    if folded is not None:
        with_note(fig, folded.note())
    return fig


def sweep_labels(rows: pd.DataFrame, key: str = "sweep") -> dict[int, str]:
    """A label per sweep (or line) naming only what differs between them, never the batch."""
    firsts = rows.sort_values(key, kind="stable").groupby(key).head(1)
    parts = [p for p in lbl.CELL_PARTS if p not in ("batch_per_rank", "global_batch")]
    if "line_kind" in rows.columns and (rows["line_kind"] == "weak").any():
        parts = [p for p in parts if p not in ("nodes", "ranks")]
    names = lbl.labels(firsts, parts)
    return dict(zip(firsts[key].tolist(), names, strict=True))
