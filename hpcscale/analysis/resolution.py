"""How finely a run's clock measured its times, and how far above 1 that alone can lift an
efficiency: a superlinear flag must not be raised by the clock's rounding.

A time taken as the difference of two stamps of resolution δ is off by less than δ, and so is
a mean of such differences (an epoch time) and the rate of a sum of them (samples / the epochs'
time): relative to the measured time T, by less than ρ = δ / T. An efficiency divides a cell's
time by its baseline's (strong: T_b / (s·T_N); the throughput forms reduce to the same times),
so the smallest true efficiency the measurements allow is E · (1 − ρ_b) / (1 + ρ_N): the
efficiency is above 1 for sure only when E > (1 + ρ_N) / (1 − ρ_b). `efficiency_tolerance`
is that bound minus 1.

The resolution belongs to the time source: MLPerf's `time_ms` stamps are whole milliseconds
(the mlperf-logging package writes `int(time.time() * 1e3)`); the bundled programs time with
`time.perf_counter` (nanoseconds: nothing to allow for); a command's own extractors give a
number whose clock is unknown, so nothing is allowed for either.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MLLOG_STAMP_S = 1e-3  # MLLOG `time_ms`: integer milliseconds
# `extractors` (the collector's column for a command run) names each source it read.
SOURCE_RESOLUTION_S: dict[str, float] = {"mllog": MLLOG_STAMP_S}


def time_resolution_s(runs: pd.DataFrame) -> pd.Series:
    """Per run, the resolution δ (s) of the stamps its times were taken from; 0 when finer than
    anything worth allowing for or unknown."""
    if "extractors" not in runs.columns:
        return pd.Series(0.0, index=runs.index)
    return runs["extractors"].map(_of_sources).astype(float)


def cell_resolution(cells: pd.DataFrame, runs: pd.DataFrame) -> list[float]:
    """Per cell (with `run_ids`): the coarsest resolution of its runs' time sources."""
    delta = dict(zip(runs["run_id"].map(str), time_resolution_s(runs), strict=True))
    return [
        max((delta.get(str(r), 0.0) for r in ids), default=0.0)
        if isinstance(ids, list | tuple)
        else 0.0
        for ids in cells["run_ids"]
    ]


def _of_sources(said: object) -> float:
    if not isinstance(said, str):
        return 0.0
    sources = {s.strip() for s in said.split(";")}
    return max((SOURCE_RESOLUTION_S.get(s, 0.0) for s in sources), default=0.0)


def efficiency_tolerance(cells: pd.DataFrame, time_column: str = "epoch_time_s") -> np.ndarray:
    """Per cell (derive's, with `time_resolution_s`, the time column `time_column` (a `time:`
    metric's own) and its `base_<time_column>`, `group`): (1 + δ/T_N) / (1 − δ/T_b) − 1, the
    most the clock's resolution δ (the group's coarsest) can lift its efficiency above the
    true one; 0 where δ is 0 or unknown."""
    if cells.empty or "time_resolution_s" not in cells.columns:
        return np.zeros(len(cells))
    delta = cells.groupby("group")["time_resolution_s"].transform("max").to_numpy(float)
    t_n = cells[time_column].to_numpy(float)
    t_b = cells[f"base_{time_column}"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tol = (1.0 + delta / t_n) / (1.0 - delta / t_b) - 1.0
    ok = (delta > 0) & np.isfinite(tol) & (tol >= 0) & (delta < t_b)
    return np.where(ok, tol, 0.0)
