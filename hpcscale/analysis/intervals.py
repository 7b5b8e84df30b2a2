"""Confidence intervals over repeats, and whether two cells differ by more than their noise.

The interval: a 95 % percentile bootstrap of the median of a cell's repeats (2000 resamples,
fixed seed, so a report is reproducible). Speedup and efficiency are ratios of two cells' medians
(baseline and cell); their interval resamples both cells' repeats independently, so the
baseline's noise counts too. A cell with fewer than two repeats (or a baseline with fewer than
two) has no interval (NaN), and then no comparison can say which cell is faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

LEVEL = 0.95
RESAMPLES = 2000
SEED = 13
INTERVAL_NAME = (
    f"{LEVEL:.0%} percentile bootstrap of the median of the repeats ({RESAMPLES} resamples; "
    "speedup and efficiency resample the baseline's repeats too)"
)
# Metric -> its interval columns `<metric>_lo`, `<metric>_hi` (added by `with_intervals`).
INTERVAL_METRICS: tuple[str, ...] = ("epoch_time_s", "images_per_s", "speedup", "efficiency")
Verdict = Literal["faster", "slower", "within noise", "no interval"]


def _finite(samples: npt.ArrayLike) -> np.ndarray:
    a = np.asarray(samples, dtype=float).ravel()
    return a[np.isfinite(a)]


def _medians(samples: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    idx = rng.integers(0, samples.size, size=(n, samples.size))
    return np.median(samples[idx], axis=1)


def bootstrap_median(
    samples: npt.ArrayLike, level: float = LEVEL, n: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float]:
    """(lower, upper) percentile-bootstrap interval of the median; NaN with < 2 samples."""
    x = _finite(samples)
    if x.size < 2:
        return (np.nan, np.nan)
    meds = _medians(x, np.random.default_rng(seed), n)
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(meds, [tail, 100.0 - tail])
    return (float(lo), float(hi))


def bootstrap_ratio(
    numerator: npt.ArrayLike,
    denominator: npt.ArrayLike,
    level: float = LEVEL,
    n: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """Interval of median(numerator) / median(denominator), both resampled independently;
    NaN unless both have two or more samples."""
    a, b = _finite(numerator), _finite(denominator)
    if a.size < 2 or b.size < 2:
        return (np.nan, np.nan)
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = _medians(a, rng, n) / _medians(b, rng, n)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return (np.nan, np.nan)
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(ratios, [tail, 100.0 - tail])
    return (float(lo), float(hi))


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool | None:
    """Whether two closed intervals share a point; None when either is missing (NaN)."""
    if not all(np.isfinite(v) for v in (*a, *b)):
        return None
    return bool(a[0] <= b[1] and b[0] <= a[1])


def verdict(
    value_a: float,
    ci_a: tuple[float, float],
    value_b: float,
    ci_b: tuple[float, float],
    higher_is_better: bool,
) -> Verdict:
    """How A compares with B: 'faster' / 'slower' only when the intervals do not overlap."""
    over = overlaps(ci_a, ci_b)
    if over is None:
        return "no interval"
    if over:
        return "within noise"
    better = value_a > value_b if higher_is_better else value_a < value_b
    return "faster" if better else "slower"


def with_intervals(cells: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Add `<m>_lo`, `<m>_hi` for INTERVAL_METRICS to derived cells (needs `run_ids`, `group`,
    `base_axis_value`, `scale`, `scaling`), from the per-run values in `runs` (run_id,
    epoch_time_s, images_per_s). The baseline cell's speedup is 1 by definition: no interval."""
    out = cells.copy()
    for m in INTERVAL_METRICS:
        out[f"{m}_lo"] = np.nan
        out[f"{m}_hi"] = np.nan
    if out.empty or "run_ids" not in out.columns:
        return out
    per_run = runs.drop_duplicates("run_id").set_index("run_id")

    def samples(ids: Sequence[str], metric: str) -> np.ndarray:
        known = [i for i in ids if i in per_run.index]
        return _finite(per_run.loc[known, metric]) if known else np.array([])

    base = out.sort_values(["group", "axis_value", "nodes"], kind="stable").groupby("group").head(1)
    base_ids = dict(zip(base["group"], base["run_ids"], strict=True))
    base_index = set(base.index)
    for i, row in out.iterrows():
        for m in ("epoch_time_s", "images_per_s"):
            out.loc[i, [f"{m}_lo", f"{m}_hi"]] = bootstrap_median(samples(row["run_ids"], m))
        if i in base_index or row["scaling"] not in ("weak", "strong"):
            continue
        if isinstance(row.get("baseline_problem"), str) or pd.isna(row.get("speedup", 1.0)):
            continue  # no valid baseline: no speedup, so no interval around it either
        b_ids = base_ids[row["group"]]
        if row["scaling"] == "strong":  # T_b / T_N
            lo, hi = bootstrap_ratio(
                samples(b_ids, "epoch_time_s"), samples(row["run_ids"], "epoch_time_s")
            )
        else:  # X_N / X_b
            lo, hi = bootstrap_ratio(
                samples(row["run_ids"], "images_per_s"), samples(b_ids, "images_per_s")
            )
        out.loc[i, ["speedup_lo", "speedup_hi"]] = (lo, hi)
        out.loc[i, ["efficiency_lo", "efficiency_hi"]] = (lo / row["scale"], hi / row["scale"])
    return out


def interval(row: pd.Series, metric: str) -> tuple[float, float]:
    """A cell's (lo, hi) for `metric`, NaN when it has none."""
    return (
        float(row.get(f"{metric}_lo", np.nan)),
        float(row.get(f"{metric}_hi", np.nan)),
    )
