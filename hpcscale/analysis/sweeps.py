"""Which cells a study compares: the sweeps of a knob at otherwise equal settings, and the
scaling groups measured at two sizes or more. The report shows a section only when its
selection here is not empty, so the choice of what counts as a sweep lives in one place.

Inputs are `derive.derive()` cells (one row per cell, with `group` and `axis_value`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hpcscale.model.vocab import cell_keys


def swept(cells: pd.DataFrame, cols: Sequence[str], free: Sequence[str] = ()) -> pd.DataFrame:
    """Cells of the sweeps over `cols`: groups of cells equal in everything else (but `free`)
    that hold more than one combination of `cols`."""
    if cells.empty:
        return cells
    key = sweep_keys(cells, cols, free)
    combo = joined(cells, list(cols))
    counts = combo.groupby(key).transform("nunique")
    return cells[counts > 1]


def sweep_keys(cells: pd.DataFrame, cols: Sequence[str], free: Sequence[str] = ()) -> pd.Series:
    """Per cell, a key shared by the cells equal in everything but `cols` (and `free`): one
    sweep over `cols` per key."""
    return joined(cells, [k for k in cell_keys(cells.columns) if k not in cols and k not in free])


def joined(frame: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    """Each row's values of `cols` as one text ("|"-joined, None and NaN as written), from each
    column's values as Python strings: joining row by row (`agg(axis=1)`) made a Series per
    row, and pandas' string columns made even `map(str)` slow at 10,000 cells."""
    if not cols:
        return pd.Series("", index=frame.index, dtype=object)
    texts = [map(str, frame[c].tolist()) for c in cols]
    return pd.Series(
        ["|".join(t) for t in zip(*texts, strict=True)], index=frame.index, dtype=object
    )


def scaled_groups(cells: pd.DataFrame) -> pd.DataFrame:
    """Weak/strong cells of groups measured at two sizes or more (the ones a line can show)."""
    scaled = cells[cells["scaling"].isin(["weak", "strong"])]
    sizes = scaled.groupby("group")["axis_value"].transform("nunique")
    return scaled[sizes >= 2]


def timed(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells with the framework's trace read (communication measured)."""
    return cells[cells["comm_s"].notna()]


def fusion_sweep(cells: pd.DataFrame) -> pd.DataFrame:
    """Cycle time x fusion threshold at otherwise equal settings."""
    return swept(cells, ["fusion_threshold_mb", "cycle_time_ms"])


def precision_sweep(cells: pd.DataFrame) -> pd.DataFrame:
    """fp16 all-reduce and/or mixed precision switched at otherwise equal settings."""
    return swept(cells, ["fp16_allreduce", "mixed_precision"])


def hierarchical_sweep(cells: pd.DataFrame) -> pd.DataFrame:
    """Hierarchical all-reduce on and off, at one or more fusion thresholds (seed 001's table
    pairs each threshold with both settings)."""
    rows = swept(cells, ["hierarchical_allreduce"], free=["fusion_threshold_mb"])
    return swept(rows, ["hierarchical_allreduce", "fusion_threshold_mb"]) if len(rows) else rows


def batch_sweep(cells: pd.DataFrame) -> pd.DataFrame:
    """Batch sizes at otherwise equal settings."""
    return swept(cells, ["batch_per_rank", "global_batch"])


def layout_sweep(cells: pd.DataFrame) -> pd.DataFrame:
    """CPU ranks per node x threads per rank on the same nodes (the threads must differ: a
    layout sweep trades ranks for threads)."""
    cpu = cells[cells["device"] == "cpu"]
    free = ["ranks", "gpus", "batch_per_rank", "global_batch"]
    rows = swept(cpu, ["tasks_per_node", "threads_per_task"], free=free)
    return swept(rows, ["threads_per_task"], free=[*free, "tasks_per_node"]) if len(rows) else rows
