"""The one pipeline the report and the reference checks share: runs in, one row per cell out,
with repeats folded, the group baseline attached and every derived metric computed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcscale.analysis.baseline import AGG_METRICS, BASED, aggregate_repeats, with_baseline
from hpcscale.analysis.frame import check_axis, default_axis, normalise
from hpcscale.analysis.intervals import with_intervals
from hpcscale.analysis.metric import chosen_metric, extra_metrics, scaled_on
from hpcscale.analysis.models import karp_flatt
from hpcscale.analysis.overlap import with_overlap
from hpcscale.analysis.resolution import cell_resolution, efficiency_tolerance
from hpcscale.analysis.scaling import add_scaling_metrics, with_throughput
from hpcscale.model.scaling_metric import ScalingMetric


def derive(
    df: pd.DataFrame,
    axis: str | None = None,
    planned: pd.DataFrame | None = None,
    metric: ScalingMetric | str | None = None,
) -> pd.DataFrame:
    """One row per cell (median of repeats, with `<m>_min`, `<m>_max`, `repeats`), plus
    `group`, `axis`, `axis_value`, `scale`, baseline columns and DERIVED_METRICS.

    `axis` defaults to the one that varies (nodes, else GPUs, else ranks). `planned`: every run
    the campaign planned, normalised (TableContext.planned_frame, from the collector), so a
    group's baseline is the smallest size planned even when it has no result; None for a table
    that does not say (a notebook's own). `metric`: what the campaign scales on (its
    TableContext.metric; by default the one the rows were collected on, `frame_metric`), whose
    time and throughput columns the speedup, efficiency and intervals key on."""
    runs = with_throughput(normalise(df))
    metric = chosen_metric(metric, runs)
    # the axis the campaign varies, even when only one of its sizes has a result
    axis = check_axis(axis or default_axis(runs if planned is None else planned))
    # a command's own metrics (samples_per_s, ...) are folded too: references may check them
    metrics = (*AGG_METRICS, *extra_metrics(runs, AGG_METRICS))
    # the metric scaled on is folded whatever metric_units says (a notebook's own table)
    metrics += tuple(
        c
        for c in dict.fromkeys((metric.time_column, metric.throughput_column))
        if c in runs.columns and c not in metrics
    )
    based = (*BASED, metric.time_column, metric.throughput_column)
    cells = with_baseline(
        aggregate_repeats(runs, metrics), axis, metrics=tuple(dict.fromkeys(based)), planned=planned
    )
    cells["scaled_on"] = scaled_on(cells, runs)  # a command's declared metric kind
    cells["time_resolution_s"] = cell_resolution(cells, runs)  # of the runs' time source
    with np.errstate(divide="ignore", invalid="ignore"):
        cells = add_scaling_metrics(cells, metric)
        strong = (cells["scaling"] == "strong").to_numpy()
        cells["karp_flatt"] = np.where(strong, karp_flatt(cells["speedup"], cells["scale"]), np.nan)
        cells["efficiency_tolerance"] = efficiency_tolerance(
            cells, metric.time_column
        )  # the clock's rounding
    cells = with_intervals(with_overlap(cells), runs, metric=metric)
    return cells.sort_values(["group", "axis_value", "nodes"], kind="stable").reset_index(drop=True)
