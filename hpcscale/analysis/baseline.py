"""Grouping runs, folding repeats, and finding each group's baseline.

A *cell* is one matrix point (every run field but run_id and repeat); its repeats are folded
into a median with min, max and count. A *group* is the set of cells that share everything but
the scaled axis; its baseline is the cell with the smallest axis value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from hpcscale.analysis import EXACT_COLUMNS, METRIC_COLUMNS, TIMELINE_COLUMNS
from hpcscale.analysis.frame import check_axis
from hpcscale.core.vocab import KNOBS

SHARED: tuple[str, ...] = ("campaign", "model", "scaling", "device", *KNOBS, "threads_per_task")
# With nodes as the axis the per-node layout must match; with ranks or GPUs it is what varies.
LAYOUT_BY_AXIS: dict[str, tuple[str, ...]] = {
    "nodes": ("tasks_per_node", "gpus_per_node"),
    "ranks": (),
    "gpus": (),
}
BATCH_BY_SCALING: dict[str, tuple[str, ...]] = {
    "weak": ("batch_per_rank",),
    "strong": ("global_batch",),
    "none": ("batch_per_rank", "global_batch"),
}
CELL_KEYS: tuple[str, ...] = (
    *SHARED,
    "nodes",
    "tasks_per_node",
    "gpus_per_node",
    "ranks",
    "gpus",
    "batch_per_rank",
    "global_batch",
)
AGG_METRICS: tuple[str, ...] = (*METRIC_COLUMNS, *TIMELINE_COLUMNS, *EXACT_COLUMNS)


def group_keys(axis: str, scaling: str) -> list[str]:
    """Columns a group shares: model, strategy, MPI flavour, knobs, device, layout, scaling, and
    the batch that the scaling mode holds fixed (per rank for weak, global for strong)."""
    check_axis(axis)
    return [*SHARED, *LAYOUT_BY_AXIS[axis], *BATCH_BY_SCALING.get(scaling, ())]


def aggregate_repeats(df: pd.DataFrame, metrics: Sequence[str] = AGG_METRICS) -> pd.DataFrame:
    """One row per cell: the cell's run fields, each metric's median plus `<m>_min`, `<m>_max`,
    `repeats` (runs in the cell) and `run_ids`. Expects a `frame.normalise`d frame."""
    metrics = [m for m in metrics if m in df.columns]
    cols = [*CELL_KEYS, *metrics, "repeats", "run_ids"]
    cols += [f"{m}_{s}" for m in metrics for s in ("min", "max")]
    if df.empty:
        return pd.DataFrame(columns=cols)
    cell = df.groupby(list(CELL_KEYS), dropna=False, sort=False).ngroup()
    # Key values from each cell's first row keep None and dtypes (groupby keys turn None to NaN).
    first = df.groupby(cell, sort=False).head(1)
    out = first[list(CELL_KEYS)].set_index(cell[first.index]).sort_index()
    num = df[metrics].groupby(cell)
    out = out.join(num.median())
    out = out.join(num.min().add_suffix("_min"))
    out = out.join(num.max().add_suffix("_max"))
    out["repeats"] = cell.value_counts()
    out["run_ids"] = df.groupby(cell)["run_id"].agg(list)
    return out.reset_index(drop=True)[cols]


def iter_groups(df: pd.DataFrame, axis: str) -> Iterator[tuple[int, pd.DataFrame]]:
    """(group id, rows) for each group; works on run rows and on aggregated cells alike."""
    gid = group_ids(df, axis)
    for key in sorted(gid.unique()):
        yield int(key), df[gid == key]


def group_ids(df: pd.DataFrame, axis: str) -> pd.Series:
    """A group number per row, stable for a given frame (groups numbered in first-seen order)."""
    ids = pd.Series(np.full(len(df), -1, dtype=np.int64), index=df.index)
    next_id = 0
    for scaling in pd.unique(df["scaling"]):
        mask = df["scaling"] == scaling
        sub = df[mask]
        local = sub.groupby(group_keys(axis, str(scaling)), dropna=False, sort=False).ngroup()
        ids[mask] = local + next_id
        next_id += int(local.max()) + 1 if len(local) else 0
    return ids


def with_baseline(
    agg: pd.DataFrame, axis: str, metrics: Sequence[str] = ("epoch_time_s", "images_per_s")
) -> pd.DataFrame:
    """Add `group`, `axis` (its name), `axis_value`, `base_axis_value`, `scale` (= axis value /
    baseline's) and `base_<metric>` for each metric, from the group's smallest-axis cell (ties:
    fewest nodes, then first)."""
    out = agg.copy()
    check_axis(axis)
    out["group"] = group_ids(out, axis) if len(out) else pd.Series(dtype=np.int64)
    out["axis"] = axis
    out["axis_value"] = out[axis] if len(out) else pd.Series(dtype=np.int64)
    base_rows = (
        out.sort_values(["group", "axis_value", "nodes"], kind="stable").groupby("group").head(1)
    )
    base = base_rows.set_index("group")
    out["base_axis_value"] = out["group"].map(base["axis_value"])
    out["scale"] = out["axis_value"] / out["base_axis_value"]
    for m in metrics:
        out[f"base_{m}"] = out["group"].map(base[m]) if m in base.columns else np.nan
    return out
