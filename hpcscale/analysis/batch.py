"""Batch size as the swept axis: speedup against the smallest batch (seed 000's Fig. 5) and time
per iteration against the batch (seed 003's Goyal et al. Fig. 7). Pure functions over `derive`
cells and the collector's run table.

Speedup is relative to the smallest batch of each sweep (cells equal in everything but the
batch): on throughput (the campaign's scaling metric's), over the baseline's; to a training
target, the baseline's wall time to the target over the cell's (seed 000 timed 16/32/64 to the
same target loss).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hpcscale.analysis.frame import FrameError, normalise
from hpcscale.analysis.sweeps import batch_sweep, scaled_groups
from hpcscale.analysis.targets import campaign_targets
from hpcscale.model.scaling_metric import ScalingMetric, metric_of
from hpcscale.model.targets import TargetSpec
from hpcscale.model.vocab import cell_keys

BATCH_COLUMNS: tuple[str, ...] = ("batch_per_rank", "global_batch")
THROUGHPUT = "throughput"
MEASURE_COLUMNS: tuple[str, ...] = ("measure", "value", "base_value", "speedup", "vs_previous")
STEP_SOURCES = {"p50": "median timed step", "epoch": "epoch time / steps"}


def sweep_ids(cells: pd.DataFrame, free: Sequence[str] = BATCH_COLUMNS) -> pd.Series:
    """A number per cell: cells equal in every cell key but `free` share it (one sweep)."""
    keys = [k for k in cell_keys(cells.columns) if k not in free and k in cells.columns]
    if cells.empty:
        return pd.Series(dtype=np.int64)
    key = cells[keys].map(str).agg("|".join, axis=1)
    return key.groupby(key, sort=True).ngroup()


def batch_speedups(
    cells: pd.DataFrame,
    runs: pd.DataFrame | None = None,
    specs: Sequence[TargetSpec] = (),
    metric: ScalingMetric | str | None = None,
) -> pd.DataFrame:
    """One row per (batch-sweep cell, measure): the cell's columns plus `sweep`, `measure`
    ('throughput', or 'time to <target>'), `value` (`metric`'s throughput: images/s by default,
    or s to the target),
    `base_value` (the sweep's smallest batch's), `speedup` and `vs_previous` (the gain over the
    next smaller batch, as a fraction: seed 000's "6 % for doubling the batch").

    Targets are `specs` only, absolute thresholds common to every batch (seed 000's same target
    loss): without specs there is no time-to-target speedup, since each run's own plateau is no
    common target (a batch plateauing lower but sooner would look faster). A target only
    appears when some cell of a sweep reached it. A baseline with no value gives
    NaN speedups for its sweep, never the next batch up."""
    rows = batch_sweep(cells)
    if rows.empty:
        return pd.DataFrame(columns=[*cells.columns, "sweep", *MEASURE_COLUMNS])
    rows = rows.assign(sweep=sweep_ids(rows).to_numpy())
    rows = rows.sort_values(["sweep", "batch_per_rank", "global_batch"], kind="stable")
    parts = [
        _measure(rows, THROUGHPUT, rows[metric_of(metric).throughput_column], higher_is_better=True)
    ]
    for name, times in _target_times(rows, runs, specs).items():
        parts.append(_measure(rows, f"time to {name}", times, higher_is_better=False))
    return pd.concat(parts, ignore_index=True)


def _measure(
    rows: pd.DataFrame, measure: str, values: pd.Series, higher_is_better: bool
) -> pd.DataFrame:
    out = rows.assign(measure=measure, value=values.to_numpy(float))
    # rows are sorted, smallest batch first; iloc, since "first" would skip a missing baseline
    base = out.groupby("sweep")["value"].transform(lambda v: v.iloc[0])
    prev = out.groupby("sweep")["value"].shift(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if higher_is_better:
            out["speedup"], gain = out["value"] / base, out["value"] / prev
        else:
            out["speedup"], gain = base / out["value"], prev / out["value"]
    out["base_value"] = base
    out["vs_previous"] = gain - 1.0
    return out


def _target_times(
    rows: pd.DataFrame, runs: pd.DataFrame | None, specs: Sequence[TargetSpec]
) -> dict[str, pd.Series]:
    """Per absolute target (`specs`), each row's wall time to it (median over repeats; NaN:
    not reached). No specs: nothing, never the default per-run plateau."""
    if runs is None or runs.empty or not specs:
        return {}
    try:
        found = campaign_targets(runs, specs)
    except FrameError:  # e.g. a target naming no recorded loss: the target section says so
        return {}
    if found.cells.empty:
        return {}
    folded = found.cells.assign(t=found.cells["time_to_target_s"])
    out: dict[str, pd.Series] = {}
    for name, sub in folded.groupby("target", sort=False):
        by_ids = {frozenset(ids): t for ids, t in zip(sub["run_ids"], sub["t"], strict=True)}
        times = pd.Series(
            [by_ids.get(frozenset(ids), np.nan) for ids in rows["run_ids"]],
            index=rows.index,
            dtype=float,
        )
        if times.notna().any():
            out[str(name)] = times
    return out


def step_times_ms(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: `run_id`, `p50_ms` (the median of rank 0's timed steps, `step_time_p50_ms`),
    `epoch_ms` (epoch time / steps per epoch), and `step_time_ms`/`step_time_source`: the p50
    where recorded, else the epoch-based value (NaN when not measured)."""
    p50 = _numeric(runs, "step_time_p50_ms")
    per_epoch = 1000.0 * _numeric(runs, "epoch_time_s") / _numeric(runs, "steps_per_epoch")
    p50 = np.where(np.isfinite(p50) & (p50 > 0), p50, np.nan)
    per_epoch = np.where(np.isfinite(per_epoch) & (per_epoch > 0), per_epoch, np.nan)
    ok = np.isfinite(p50)
    source = np.where(ok, STEP_SOURCES["p50"], STEP_SOURCES["epoch"])
    value = np.where(ok, p50, per_epoch)
    source = np.where(np.isfinite(value), source, None)
    run_ids = normalise(runs)["run_id"] if len(runs) else pd.Series(dtype=object)
    return pd.DataFrame(
        {
            "run_id": run_ids.to_numpy(),
            "p50_ms": p50,
            "epoch_ms": per_epoch,
            "step_time_ms": value,
            "step_time_source": source,
        }
    )


def iteration_rows(cells: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Cells whose time per iteration is measured, along `line`s against the global batch:
    the batch sweeps when the campaign sweeps the batch at a fixed scale, else the weak-scaling
    groups (the global batch grows with the ranks, as in Goyal et al.'s Fig. 7). Adds
    `step_time_ms` (median over the cell's repeats), `step_time_source` and `line`.

    One source per line, never mixed: the p50 step time only when every run of the line has
    it, else epoch time / steps for the whole line (the p50 excludes burn-in and input stalls
    an epoch time includes, so mixing them would bend the line)."""
    if cells.empty or runs.empty:
        return cells.iloc[0:0]
    sweeps = batch_sweep(cells)
    if len(sweeps):
        rows = sweeps.assign(line=sweep_ids(sweeps).to_numpy(), line_kind="batch")
    else:
        weak = scaled_groups(cells)
        weak = weak[(weak["scaling"] == "weak") & (weak["global_batch"] > 0)]
        rows = weak.assign(line=weak["group"].to_numpy(), line_kind="weak")
    steps = step_times_ms(runs).drop_duplicates("run_id").set_index("run_id")
    # every cell's runs in one long frame (a lookup per cell made this quadratic-slow)
    ids = [list(v) for v in rows["run_ids"]]
    owner = np.repeat(np.arange(len(ids)), [len(v) for v in ids])
    where = steps.index.get_indexer(pd.Index([r for v in ids for r in v], dtype=object))
    owner, where = owner[where >= 0], where[where >= 0]  # the runs the table has
    p50 = steps["p50_ms"].to_numpy(float)[where]
    per_epoch = steps["epoch_ms"].to_numpy(float)[where]
    found = np.bincount(owner, minlength=len(ids))
    no_p50 = np.bincount(owner, weights=np.isnan(p50), minlength=len(ids))
    full = pd.Series((found > 0) & (no_p50 == 0), index=rows.index)
    # the p50 for a whole line only when every run of it has one: one source per line
    every = full.groupby(rows["line"]).transform("all").to_numpy(bool)
    ms = pd.Series(np.where(every[owner], p50, per_epoch)).groupby(owner).median()
    rows = rows.assign(
        step_time_ms=ms.reindex(range(len(ids))).to_numpy(float),
        step_time_source=pd.Series(
            np.where(every, STEP_SOURCES["p50"], STEP_SOURCES["epoch"]), rows.index, dtype=object
        ),
    )
    rows = rows[rows["step_time_ms"].notna()]
    sizes = rows.groupby("line")["global_batch"].transform("nunique")
    return rows[sizes >= 2].sort_values(["line", "global_batch"], kind="stable")


def _numeric(runs: pd.DataFrame, col: str) -> np.ndarray:
    if col not in runs.columns:
        return np.full(len(runs), np.nan)
    return pd.to_numeric(runs[col], errors="coerce").to_numpy(float)
