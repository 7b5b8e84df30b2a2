"""Throughput, speedup, scaling efficiency and communication overhead.

Strong scaling holds the problem fixed, so it is judged on time: efficiency = T_b / (s * T_N).
Weak scaling grows the problem with the ranks, so it is judged on throughput:
efficiency = X_N / (s * X_b). Here b is the group's baseline and s = N / N_b (s = N when the
baseline has one node/GPU, giving the textbook T1 / (N * TN) and XN / (N * X1)). Communication
overhead is seed 000's: 1/efficiency - 1 = (N * T_N - T_1) / T_1. These are the bundled
programs' definitions; a command workload is judged on the metric it declared (`throughput:`
X_N / X_b for strong scaling too, `time:` T_b / T_N), never on another column it printed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from hpcscale.analysis.metric import BUNDLED, THROUGHPUT, TIME
from hpcscale.model.scaling_metric import ScalingMetric, metric_of

ArrayLike = npt.ArrayLike


def throughput(images: ArrayLike, seconds: ArrayLike) -> np.ndarray:
    """Images per second (seed 001: data set size / one epoch's time)."""
    return np.asarray(images, dtype=float) / np.asarray(seconds, dtype=float)


def speedup_strong(t_base: ArrayLike, t_n: ArrayLike) -> np.ndarray:
    return np.asarray(t_base, dtype=float) / np.asarray(t_n, dtype=float)


def speedup_weak(x_base: ArrayLike, x_n: ArrayLike) -> np.ndarray:
    """Scaled speedup: throughput relative to the baseline's."""
    return np.asarray(x_n, dtype=float) / np.asarray(x_base, dtype=float)


def efficiency_strong(t_base: ArrayLike, t_n: ArrayLike, scale: ArrayLike) -> np.ndarray:
    return speedup_strong(t_base, t_n) / np.asarray(scale, dtype=float)


def efficiency_weak(x_base: ArrayLike, x_n: ArrayLike, scale: ArrayLike) -> np.ndarray:
    return speedup_weak(x_base, x_n) / np.asarray(scale, dtype=float)


def overhead(efficiency: ArrayLike) -> np.ndarray:
    """Fraction of extra work per useful work: 8.70 % goes with efficiency 0.92 (seed 000)."""
    return 1.0 / np.asarray(efficiency, dtype=float) - 1.0


def with_throughput(df: pd.DataFrame) -> pd.DataFrame:
    """Fill `images_per_s` where the run did not record it, from dataset_size / epoch_time_s.

    The harness's own figure wins: it counts the images an epoch actually processed, which
    differs from the data set size when an epoch is a fixed number of steps. A collected run
    (it has `steps_per_epoch`) whose figure is NaN had per-epoch lists that do not add up
    (hpcscale.collect.rates): it stays NaN rather than get a guess."""
    out = df.copy()
    fallback = pd.Series(throughput(out["dataset_size"], out["epoch_time_s"]), index=out.index)
    if "steps_per_epoch" in out.columns:
        fallback = fallback.where(pd.to_numeric(out["steps_per_epoch"], errors="coerce").isna())
    out["images_per_s"] = out["images_per_s"].fillna(fallback)
    return out


def add_scaling_metrics(
    cells: pd.DataFrame, metric: ScalingMetric | str | None = None
) -> pd.DataFrame:
    """Add speedup, efficiency, overhead and overhead_pct to cells that carry baseline columns
    (`baseline.with_baseline`), and `speedup_on` (TIME or THROUGHPUT: what they divide).
    Scaling 'none' gets a throughput speedup and no efficiency. A command's cells (`scaled_on`
    from derive) are judged on the metric it declared: `throughput:` X_N/X_b, `time:` T_b/T_N.
    The times and throughputs are `metric`'s columns (images/s and the epoch time by default)."""
    metric = metric_of(metric)
    time, thr = metric.time_column, metric.throughput_column
    out = cells.copy()
    strong = (out["scaling"] == "strong").to_numpy()
    weak = (out["scaling"] == "weak").to_numpy()
    t_b, t_n = out[f"base_{time}"], out[time]
    x_b, x_n = out[f"base_{thr}"], out[thr]
    s = out["scale"]
    # A fixed problem done X_N/X_b times faster takes T_b/T_N less time: a strong-scaling group
    # with no time at all (a command reporting only its throughput) is judged on its
    # throughput. A group with times keeps one definition: its untimed cells get none.
    timed = pd.Series(np.isfinite(speedup_strong(t_b, t_n)), index=out.index)
    if "group" in out.columns:
        timed = timed.groupby(out["group"].to_numpy()).transform("any")
    # A command is judged on the metric it declared (`scaled_on`), whatever else it printed.
    declared = out.get("scaled_on", pd.Series(BUNDLED, index=out.index)).to_numpy(object)
    on_time = strong & np.where(declared == BUNDLED, timed.to_numpy(), declared == TIME)
    out["speedup_on"] = np.where(strong | weak, np.where(on_time, TIME, THROUGHPUT), None).astype(
        object
    )
    out["speedup"] = np.where(on_time, speedup_strong(t_b, t_n), speedup_weak(x_b, x_n))
    eff = np.where(
        on_time,
        efficiency_strong(t_b, t_n, s),
        np.where(weak | strong, efficiency_weak(x_b, x_n, s), np.nan),
    )
    out["efficiency"] = eff
    out["overhead"] = overhead(eff)
    out["overhead_pct"] = 100.0 * out["overhead"]
    return out
