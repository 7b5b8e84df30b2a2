"""Grouping runs, folding repeats, and finding each group's baseline.

A *cell* is one resolved setting of the matrix: runs equal in every run field and workload
argument (`vocab.cell_keys`: `args.<name>` columns included), so only the repeat (and its seed)
differs; its repeats are folded into a median with min, max and count. A *group* is the set of
cells that share everything but the scaled axis (and what follows from it: ranks, GPUs, the
layout when the axis is ranks or GPUs, the batch the scaling mode grows); its baseline is the
cell with the smallest axis value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from hpcscale.analysis import EXACT_COLUMNS, METRIC_COLUMNS, TIMELINE_COLUMNS
from hpcscale.analysis.frame import check_axis
from hpcscale.model.scaling_metric import EPOCH_TIME_S, IMAGES_PER_S
from hpcscale.model.vocab import CELL_FIELDS, arg_columns, cell_keys

# With nodes as the axis the per-node layout must match; with ranks or GPUs it is what varies.
LAYOUT_BY_AXIS: dict[str, tuple[str, ...]] = {
    "nodes": ("tasks_per_node", "gpus_per_node", "replicas_per_task"),
    "ranks": (),
    "gpus": (),
}
BATCH_BY_SCALING: dict[str, tuple[str, ...]] = {
    "weak": ("batch_per_rank",),
    "strong": ("global_batch",),
    "none": ("batch_per_rank", "global_batch"),
}
# The cell fields that change with the scale, whatever the axis: never shared by a group.
SCALED: tuple[str, ...] = (
    "nodes",
    "ranks",
    "gpus",
    *LAYOUT_BY_AXIS["nodes"],
    *BATCH_BY_SCALING["none"],
)
# What every cell of a group shares, besides its workload arguments (`shared_keys`).
SHARED: tuple[str, ...] = tuple(f for f in CELL_FIELDS if f not in SCALED)
# The run fields of a cell; a frame's cells also differ in its `args.<name>` columns
# (`vocab.cell_keys(df.columns)`, which every function here uses).
CELL_KEYS: tuple[str, ...] = CELL_FIELDS
AGG_METRICS: tuple[str, ...] = (*METRIC_COLUMNS, *TIMELINE_COLUMNS, *EXACT_COLUMNS)
# The columns every cell carries its group baseline's value of (`base_<m>`): the bundled
# programs' time and throughput; derive adds the campaign's scaling metric's own.
BASED: tuple[str, ...] = (EPOCH_TIME_S, IMAGES_PER_S)


def shared_keys(columns: Iterable[object] = ()) -> list[str]:
    """What every cell of a group shares whatever the axis: SHARED and the workload arguments
    among `columns`."""
    return [*SHARED, *arg_columns(columns)]


def group_keys(axis: str, scaling: str, columns: Iterable[object] = ()) -> list[str]:
    """Columns a group shares: every cell field but the scale (program, model, epochs, knobs,
    MPI flavour, device, scaling, ...), the workload arguments among `columns`, the layout when
    the axis is nodes, and the batch that the scaling mode holds fixed (per rank for weak,
    global for strong)."""
    check_axis(axis)
    return [*shared_keys(columns), *LAYOUT_BY_AXIS[axis], *BATCH_BY_SCALING.get(scaling, ())]


def aggregate_repeats(df: pd.DataFrame, metrics: Sequence[str] = AGG_METRICS) -> pd.DataFrame:
    """One row per cell: the cell's run fields, each metric's median plus `<m>_min`, `<m>_max`,
    `repeats` (runs in the cell) and `run_ids`. Expects a `frame.normalise`d frame."""
    metrics = [m for m in metrics if m in df.columns]
    keys = list(cell_keys(df.columns))
    cols = [*keys, *metrics, "repeats", "run_ids"]
    cols += [f"{m}_{s}" for m in metrics for s in ("min", "max")]
    if df.empty:
        return pd.DataFrame(columns=cols)
    cell = cell_ids(df)
    # Key values from each cell's first row keep None and dtypes (groupby keys turn None to NaN).
    first = df.groupby(cell, sort=False).head(1)
    out = first[keys].set_index(cell[first.index]).sort_index()
    num = df[metrics].groupby(cell)
    out = out.join(num.median())
    out = out.join(num.min().add_suffix("_min"))
    out = out.join(num.max().add_suffix("_max"))
    out["repeats"] = cell.value_counts()
    # lists built in Python: groupby's agg(list) runs a Python function per cell anyway, over
    # an arrow text column (a 1,000-cell sweep: a tenth of a second)
    ids: dict[int, list] = {}
    for c, run_id in zip(cell.tolist(), df["run_id"].tolist(), strict=True):
        ids.setdefault(c, []).append(run_id)
    out["run_ids"] = pd.Series([ids[c] for c in out.index], index=out.index, dtype=object)
    return out.reset_index(drop=True)[cols]


def cell_ids(df: pd.DataFrame) -> pd.Series:
    """A cell number per row (first-seen order): rows equal in every cell key share one."""
    return df.groupby(list(cell_keys(df.columns)), dropna=False, sort=False).ngroup()


def iter_groups(df: pd.DataFrame, axis: str) -> Iterator[tuple[int, pd.DataFrame]]:
    """(group id, rows) for each group, by id; works on run rows and on aggregated cells alike.
    One groupby pass (a mask per group made extrapolation quadratic in runs)."""
    for key, rows in df.groupby(group_ids(df, axis), sort=True):
        yield int(key), rows


def group_ids(df: pd.DataFrame, axis: str) -> pd.Series:
    """A group number per row, stable for a given frame (groups numbered in first-seen order)."""
    ids = pd.Series(np.full(len(df), -1, dtype=np.int64), index=df.index)
    next_id = 0
    for scaling in pd.unique(df["scaling"]):
        mask = df["scaling"] == scaling
        sub = df[mask]
        keys = group_keys(axis, str(scaling), df.columns)
        local = sub.groupby(keys, dropna=False, sort=False).ngroup()
        ids[mask] = local + next_id
        next_id += int(local.max()) + 1 if len(local) else 0
    return ids


def with_baseline(
    agg: pd.DataFrame,
    axis: str,
    metrics: Sequence[str] = BASED,
    planned: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Add `group`, `axis` (its name), `axis_value`, `base_axis_value`, `scale` (= axis value /
    baseline's) and `base_<metric>` for each metric, from the group's smallest-axis cell (ties:
    fewest nodes, then first), plus `baseline_problem` (None, or why there is no baseline).

    `planned` (normalised run fields of every run the campaign planned, finished or not) fixes
    the baseline at the smallest axis value planned: when that cell has no valid result its
    group gets NaN baseline metrics (so no speedup or efficiency), never the next cell up."""
    out = agg.copy()
    check_axis(axis)
    out["group"] = group_ids(out, axis) if len(out) else pd.Series(dtype=np.int64)
    out["axis"] = axis
    out["axis_value"] = out[axis] if len(out) else pd.Series(dtype=np.int64)
    base_rows = (
        out.sort_values(["group", "axis_value", "nodes"], kind="stable").groupby("group").head(1)
    )
    base = base_rows.set_index("group")
    problem = pd.Series([None] * len(base), index=base.index, dtype=object)
    if planned is not None and len(planned) and len(base):
        for g, (value, run_ids) in _planned_baselines(base, axis, planned).items():
            if value < base.at[g, "axis_value"]:
                base.loc[g, [m for m in metrics if m in base.columns]] = np.nan
                base.at[g, "axis_value"] = value
                problem[g] = (
                    f"its baseline, {axis}={value:g}, has no valid result "
                    f"(run {', '.join(run_ids)})"
                )
    out["base_axis_value"] = out["group"].map(base["axis_value"])
    out["scale"] = out["axis_value"] / out["base_axis_value"]
    for m in metrics:
        out[f"base_{m}"] = out["group"].map(base[m]) if m in base.columns else np.nan
    out["baseline_problem"] = out["group"].map(problem) if len(out) else pd.Series(dtype=object)
    return out


def _planned_baselines(
    base: pd.DataFrame, axis: str, planned: pd.DataFrame
) -> dict[int, tuple[int, list[str]]]:
    """Per group (index of `base`, one row per group): the smallest axis value the campaign
    planned for it and the planned run ids at that value. Keys are built a column at a time
    (a Series per row made this the report's slowest step at 1,000 runs)."""
    columns = [*base.columns, *planned.columns]
    lowest: dict[tuple, tuple[int, list[str]]] = {}
    rows = zip(_keys(planned, axis, columns), planned[axis], planned["run_id"], strict=True)
    for k, v, run_id in rows:
        old = lowest.get(k)
        if old is None or v < old[0]:
            lowest[k] = (v, [str(run_id)])
        elif v == old[0]:
            old[1].append(str(run_id))
    found = {g: lowest.get(k) for g, k in zip(base.index, _keys(base, axis, columns), strict=True)}
    return {int(g): hit for g, hit in found.items() if hit is not None}


def _keys(frame: pd.DataFrame, axis: str, columns: Sequence[object]) -> list[tuple]:
    """Each row's (scaling, *its group key values), missing values as None: equal for rows of
    one group, whatever frame they come from."""
    out: list[tuple] = [()] * len(frame)
    scaling = frame["scaling"].tolist()
    for mode in dict.fromkeys(map(str, scaling)):  # str: a NaN mode is one mode too
        at = [i for i, s in enumerate(scaling) if str(s) == mode]
        sub = frame.iloc[at]
        cols = group_keys(axis, str(mode), columns)
        # _plain of each value itself: Series.map(_plain) turned the None it gave back into
        # NaN again (a float or text column), and NaN keys never matched across frames
        values = [
            [_plain(v) for v in sub[c].tolist()] if c in sub.columns else [None] * len(sub)
            for c in cols
        ]
        for i, key in zip(at, zip(*values, strict=True) if values else [()] * len(at), strict=True):
            out[i] = (scaling[i], *key)
    return out


def _plain(value: object) -> object:
    """None for a missing value, a Python scalar for a numpy one (1 and 1.0 hash alike)."""
    kind = type(value)  # the usual types first (a 1,000-cell sweep asks 45,000 times)
    if kind is str or kind is int or kind is bool:
        return value
    if kind is float:
        return None if value != value else value
    if _missing(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))
