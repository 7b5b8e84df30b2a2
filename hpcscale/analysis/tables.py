"""Display frames in the seeds' shapes, so the report only has to format them.

Inputs are `derive.derive()` cells (or the outputs of extrapolate / targets / references);
values stay numeric (percentages as 0..100), NaN where a run measured nothing. Column names
follow the seed reports.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hpcscale.analysis.intervals import LEVEL, pct
from hpcscale.analysis.references import ReferenceResult, bounds, describe
from hpcscale.analysis.strategies import strategy_names
from hpcscale.model.scaling_metric import TIME, ScalingMetric, metric_of
from hpcscale.model.vocab import arg_columns, term

AXIS_LABELS: dict[str, str] = {"nodes": "Nodes", "ranks": "Ranks", "gpus": "# GPUs"}
OVERLAP_DISPLAY: dict[str, str] = {
    "compute_s": "Compute",
    "wait_for_data_s": "Wait for data",
    "wait_for_other_tensor_data_s": "Wait for other tensor data",
    "comm_s": "Overall communication",
    "only_comm_s": "Only communication",
    "only_compute_pct": "Only compute %",
    "overlap_pct": "Overlap %",
    "only_comm_pct": "Only communication %",
}
# Named by what the sweep of step spans against the timeline measures: on synchronous runs the
# "overlap" is communication inside a training step, not communication hidden behind compute.
EXACT_DISPLAY: dict[str, str] = {
    "exact_compute_s": term("exact_compute_s").label,
    "exact_overlap_s": term("exact_overlap_s").label,
    "exact_exposed_comm_s": term("exact_exposed_comm_s").label,
}
# Interval columns name their method and level (analysis.intervals; the table notes say more).
SPEEDUP_CI = f"Speedup {pct(LEVEL)} CI (Welch t)"
EFFICIENCY_CI = f"Efficiency {pct(LEVEL)} CI (Welch t)"
# The throughput's interval column, after its heading (`Images/s`, a command's own metric's).
MEDIAN_CI = "interval of the median (order statistics; its level)"
IMAGES_CI = f"Images/s {MEDIAN_CI}"
OVERHEAD_LABEL = "Scaling loss (Ahmad & Cai's overhead, 1/E−1) (%)"
COMM_SHARE_LABEL = "Comm. share of epoch (measured, from the run's trace) (%)"
# A program without epoch times (a command workload's) has only its timeline's span to divide by.
COMM_SPAN_SHARE_LABEL = "Comm. share of timeline span (start-up included) (%)"


# A cell's scaling as the tables show it: S(trong), W(eak), - (a single scale, no scaling)
SCALING_MARK: dict[str, str] = {"strong": "S", "weak": "W", "none": "-"}


def axis_label(cells: pd.DataFrame) -> str:
    axis = str(cells["axis"].iloc[0]) if "axis" in cells.columns and len(cells) else "nodes"
    return AXIS_LABELS.get(axis, axis)


def swept_args(cells: pd.DataFrame) -> list[str]:
    """The workload-argument columns (`args.<name>`) whose value differs between the rows: a
    table shows each as a column of its own, named as the campaign names it."""
    return [
        c
        for c in arg_columns(cells.columns)
        if len({None if pd.isna(v) else v for v in cells[c]}) > 1
    ]


def with_args(out: pd.DataFrame, rows: pd.DataFrame, after: str = "Model") -> pd.DataFrame:
    """`out` (one row per row of `rows`, in its order) with each swept argument's column
    inserted after the column `after`."""
    at = list(out.columns).index(after) + 1 if after in out.columns else 0
    for i, col in enumerate(swept_args(rows)):
        out.insert(at + i, col, rows[col].to_numpy(object))
    return out


def overhead_order(cells: pd.DataFrame) -> list[str]:
    """The row order of `overhead_table` (shared with what adds columns to it)."""
    return ["model", "strategy", "cross_device_ops", "mpi", *swept_args(cells), "axis_value"]


def scaling_table(cells: pd.DataFrame, metric: ScalingMetric | str | None = None) -> pd.DataFrame:
    """Seed 001's weak/strong table plus speedup, efficiency and the repeat spread; a swept
    workload argument is a column after the model. The time and throughput are `metric`'s,
    headed by it."""
    m = metric_of(metric)
    time, thr = m.time_column, m.throughput_column
    unit = (m.unit or "s") if m.kind == TIME else "s"
    label = axis_label(cells)
    ordered = _ordered(cells, ["model", "device", "scaling", "group", "axis_value"])
    out = pd.DataFrame(
        {
            "Model": ordered["model"],
            "Scaling": ordered["scaling"].map(SCALING_MARK),
            label: ordered["axis_value"],
            "Global batch": ordered["global_batch"],
            "Batch/node": ordered["global_batch"] // ordered["nodes"],
            "CPU/GPU": ordered["device"].str.upper(),
            m.time_heading: ordered[time],
            m.throughput_heading: ordered[thr],
            "Fit time (s)": ordered["fit_time_s"],
            "Speedup": ordered["speedup"],
            SPEEDUP_CI: _ci(ordered, "speedup"),
            "Efficiency": ordered["efficiency"],
            EFFICIENCY_CI: _ci(ordered, "efficiency"),
            f"{m.time_name} min ({unit})": ordered[f"{time}_min"],
            f"{m.time_name} max ({unit})": ordered[f"{time}_max"],
            "Repeats": ordered["repeats"],
        }
    ).reset_index(drop=True)
    if f"{thr}_lo" in ordered.columns and ordered[f"{thr}_lo"].notna().any():
        at = list(out.columns).index(m.throughput_heading) + 1
        out.insert(at, f"{m.throughput_heading} {MEDIAN_CI}", _with_level(ordered, thr))
    out = with_args(out, ordered)
    names = strategy_names(ordered)
    if len(set(names)) > 1:  # the seeds' tables hold one strategy; say which when they differ
        out.insert(1, "Strategy", names)
    return out


def overhead_table(cells: pd.DataFrame, metric: ScalingMetric | str | None = None) -> pd.DataFrame:
    """Seed 000's table: its "communication overhead" (1/efficiency - 1, i.e. all scaling loss,
    labelled as such) beside the communication share measured from the framework's trace
    (comm_s / the time, `metric`'s), and scaling efficiency per strategy."""
    time = metric_of(metric).time_column
    label = axis_label(cells)
    scaled = cells[cells["scaling"].isin(["weak", "strong"])]
    ordered = _ordered(scaled, overhead_order(scaled))
    out = pd.DataFrame(
        {
            "Model": ordered["model"],
            "Strategy": strategy_names(ordered),
            label: ordered["axis_value"],
            OVERHEAD_LABEL: ordered["overhead_pct"],
            COMM_SHARE_LABEL: 100.0 * ordered["comm_s"] / ordered[time],
            "Efficiency": ordered["efficiency"],
            EFFICIENCY_CI: _ci(ordered, "efficiency"),
            "Speedup": ordered["speedup"],
            SPEEDUP_CI: _ci(ordered, "speedup"),
        }
    ).reset_index(drop=True)
    # only where the epoch's share cannot be had: two definitions never share a row
    span = ordered.get("comm_span_share", pd.Series(np.nan, ordered.index)).to_numpy(float) * 100
    span[out[COMM_SHARE_LABEL].notna().to_numpy()] = np.nan
    if not np.isnan(span).all():
        out.insert(list(out.columns).index(COMM_SHARE_LABEL) + 1, COMM_SPAN_SHARE_LABEL, span)
    return with_args(out, ordered, after="Strategy")


def overlap_table(cells: pd.DataFrame, metric: ScalingMetric | str | None = None) -> pd.DataFrame:
    """Seed 001's compute/communication overlap table, for cells that have a timeline."""
    timed = cells[cells["comm_s"].notna()]
    timed = _ordered(timed, ["model", *swept_args(timed), "axis_value", "scaling"])
    lead = {
        axis_label(cells): timed["axis_value"],
        "Scaling": timed["scaling"].map(SCALING_MARK),
        "Model": timed["model"],
        "Batch": timed["batch_per_rank"],
    }
    return with_args(_with_overlap_columns(timed, lead, metric), timed)


def fusion_table(cells: pd.DataFrame, metric: ScalingMetric | str | None = None) -> pd.DataFrame:
    """Seed 001's tensor-fusion sweep: cycle time x fusion buffer with the overlap columns."""
    rows = _ordered(cells, ["fusion_threshold_mb", "cycle_time_ms"])
    lead = {
        "Cycle time (ms)": rows["cycle_time_ms"],
        "Fusion buffer (MB)": rows["fusion_threshold_mb"],
    }
    return _with_overlap_columns(rows, lead, metric)


def fusion_grid(cells: pd.DataFrame, value: str = "epoch_time_s") -> pd.DataFrame:
    """Cycle time (rows) x fusion buffer (columns) of `value`, for the heat map."""
    grid = cells.pivot_table(
        index="cycle_time_ms", columns="fusion_threshold_mb", values=value, aggfunc="median"
    )
    grid.index.name = "Cycle time (ms)"
    grid.columns.name = "Fusion buffer (MB)"
    return grid


def precision_table(cells: pd.DataFrame, metric: ScalingMetric | str | None = None) -> pd.DataFrame:
    """Seed 001's FP16 compression / mixed-precision table."""
    rows = _ordered(cells, ["fp16_allreduce", "mixed_precision"])
    kinds = [
        _precision(bool(f), bool(m))
        for f, m in zip(rows["fp16_allreduce"], rows["mixed_precision"], strict=True)
    ]
    return _with_overlap_columns(rows, {"Type": kinds}, metric)


def hierarchical_table(
    cells: pd.DataFrame, metric: ScalingMetric | str | None = None
) -> pd.DataFrame:
    """Seed 001's hierarchical all-reduce table."""
    rows = _ordered(cells, ["fusion_threshold_mb", "hierarchical_allreduce"])
    lead = {
        "Fusion buffer (MB)": rows["fusion_threshold_mb"],
        "Hierarchical?": rows["hierarchical_allreduce"].map({True: "Yes", False: "No"}),
    }
    return _with_overlap_columns(rows, lead, metric)


def batch_sweep_table(
    cells: pd.DataFrame, metric: ScalingMetric | str | None = None
) -> pd.DataFrame:
    """Seed 001's single-node batch-size table (per model, CPU and GPU)."""
    m = metric_of(metric)
    rows = _ordered(cells, ["model", "device", "batch_per_rank"])
    return pd.DataFrame(
        {
            "Model": rows["model"],
            "CPU/GPU": rows["device"].str.upper(),
            "Batch size": rows["batch_per_rank"],
            m.time_heading: rows[m.time_column],
            m.throughput_heading: rows[m.throughput_column],
            "Fit time (s)": rows["fit_time_s"],
            "Repeats": rows["repeats"],
        }
    ).reset_index(drop=True)


def layout_table(cells: pd.DataFrame, metric: ScalingMetric | str | None = None) -> pd.DataFrame:
    """Seed 002's CPU layouts: ranks per node x threads per rank."""
    m = metric_of(metric)
    rows = _ordered(cells, ["model", "tasks_per_node", "threads_per_task"])
    return pd.DataFrame(
        {
            "Model": rows["model"],
            "Ranks/node": rows["tasks_per_node"],
            "Threads/rank": rows["threads_per_task"],
            "Layout": [
                f"{t}x{h}"
                for t, h in zip(rows["tasks_per_node"], rows["threads_per_task"], strict=True)
            ],
            "Batch/rank": rows["batch_per_rank"],
            m.time_heading: rows[m.time_column],
            m.throughput_heading: rows[m.throughput_column],
            "Repeats": rows["repeats"],
        }
    ).reset_index(drop=True)


def predictions_table(pred: pd.DataFrame) -> pd.DataFrame:
    """Extrapolations, each row marked as a prediction with its interval."""
    if pred.empty:
        return pd.DataFrame(columns=["Model", "Scaling", "Nodes", "Law", "Predicted", "Kind"])
    label = axis_label(pred)
    out = pd.DataFrame(
        {
            "Model": pred["model"],
            "Scaling": pred["scaling"].map({"strong": "S", "weak": "W"}),
            label: pred["axis_value"],
            "Law": pred["law"].str.capitalize(),
            "Metric": pred["metric"],
            "Predicted": pred["predicted"],
            "Lower": pred["lower"],
            "Upper": pred["upper"],
            "Interval": pred["interval"],
            "Unit": pred["unit"],
            "Serial fraction": pred["serial_fraction"],
            "Serial fraction s.e.": pred["serial_fraction_se"],
            "Beyond system": pred["beyond_system"].map({True: "beyond max_nodes", False: ""}),
            "Kind": pred["label"],
        }
    )
    return with_args(out, pred).reset_index(drop=True)  # a swept argument, as in the results


def comm_cost_table(cost: pd.DataFrame) -> pd.DataFrame:
    """Seed 003's ring vs parameter-server cost, in bytes and milliseconds per step."""
    if cost.empty:
        return pd.DataFrame(columns=["Model", "Processes", "Ring bytes/step", "PS bytes/step"])
    label = axis_label(cost)
    return pd.DataFrame(
        {
            "Model": cost["model"],
            label: cost["axis_value"],
            "Processes": cost["participants"],
            "Parameters": cost["param_count"],
            "Ring bytes/step": cost["ring_bytes"],
            "PS bytes/step": cost["ps_bytes"],
            "Bandwidth (GB/s)": cost["bandwidth_gbs"],
            "Ring time/step (ms)": 1e3 * cost["ring_time_s"],
            "PS time/step (ms)": 1e3 * cost["ps_time_s"],
            "Kind": cost["kind"]
            + cost.get("beyond_system", pd.Series(False, index=cost.index)).map(
                {True: ", beyond max_nodes", False: ""}
            ),
        }
    ).reset_index(drop=True)


def time_to_target_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Epochs and wall time to each target (or the accuracy plateau) per cell, from
    `targets.campaign_targets` / `fold_targets` (medians over repeats); a `target` column, when
    present, names the target of each row."""
    if cells.empty:
        return pd.DataFrame(columns=["Model", "Ranks", "Batch/rank"])
    keys = ["target", "model", "device", "strategy", *swept_args(cells), "ranks"]
    keys += ["batch_per_rank", "global_batch"]
    med = _ordered(cells, keys).reset_index(drop=True)
    nan = pd.Series(np.nan, index=med.index)
    out = pd.DataFrame(
        {
            "Model": med["model"],
            "CPU/GPU": med["device"].str.upper(),
            "Ranks": med["ranks"],
            "Batch/rank": med["batch_per_rank"],
            "Global batch": med["global_batch"],
            "Epochs to target": med.get("epochs_to_target", nan),
            "Time to target (s)": med.get("time_to_target_s", nan),
            "Plateau epoch": med.get("plateau_epoch", nan),
            "Time to plateau (s)": med.get("time_to_plateau_s", nan),
            "Repeats": med["repeats"],
        }
    )
    out = with_args(out, med)
    if "target" in med.columns:
        out.insert(0, "Target", med["target"])
    return out


def references_table(results: Sequence[ReferenceResult]) -> pd.DataFrame:
    rows = []
    for r in results:
        lo, hi = bounds(r.reference)
        rows.append(
            {
                "Result": "PASS" if r.passed else "FAIL",
                "Check": describe(r.reference),
                "Measured": np.nan if r.measured is None else r.measured,
                "Reference": r.reference.value,
                "Lower bound": lo,
                "Upper bound": hi,
                "Unit": r.reference.unit or "",
                "Message": r.message,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "Result",
            "Check",
            "Measured",
            "Reference",
            "Lower bound",
            "Upper bound",
            "Unit",
            "Message",
        ],
    )


def _ci(rows: pd.DataFrame, metric: str) -> list[object]:
    """ "[lo, hi]" per row from `<metric>_lo`/`_hi` (intervals.with_intervals); NaN without one."""
    lo = rows.get(f"{metric}_lo", pd.Series(np.nan, index=rows.index))
    hi = rows.get(f"{metric}_hi", pd.Series(np.nan, index=rows.index))
    return [
        f"[{a:.3g}, {b:.3g}]" if np.isfinite(a) and np.isfinite(b) else np.nan
        for a, b in zip(lo.astype(float), hi.astype(float), strict=True)
    ]


def _with_level(rows: pd.DataFrame, metric: str) -> list[object]:
    """ "[lo, hi] (75 %)" per row: the interval with its own level (it depends on the repeats);
    NaN without one."""
    lo, hi = rows[f"{metric}_lo"].astype(float), rows[f"{metric}_hi"].astype(float)
    level = rows.get(f"{metric}_level", pd.Series(np.nan, index=rows.index)).astype(float)
    return [
        f"[{a:.4g}, {b:.4g}] ({pct(c)})" if np.isfinite(a) and np.isfinite(b) else np.nan
        for a, b, c in zip(lo, hi, level, strict=True)
    ]


def _with_overlap_columns(
    rows: pd.DataFrame, lead: dict[str, object], metric: ScalingMetric | str | None = None
) -> pd.DataFrame:
    m = metric_of(metric)
    out = pd.DataFrame(lead, index=rows.index)
    out[m.time_heading] = rows[m.time_column]
    for col, name in OVERLAP_DISPLAY.items():
        out[name] = rows[col]
    for col, name in EXACT_DISPLAY.items():
        if col in rows.columns and rows[col].notna().any():
            out[name] = rows[col]
    return out.reset_index(drop=True)


def _ordered(cells: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    present = [c for c in by if c in cells.columns]
    return cells.sort_values(present, kind="stable", na_position="first") if present else cells


def _precision(fp16: bool, mixed: bool) -> str:
    if fp16 and mixed:
        return "FP16 + MP"
    return "FP16" if fp16 else "MP" if mixed else "No FP16/MP"
