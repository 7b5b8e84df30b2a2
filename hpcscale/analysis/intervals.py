"""Intervals over repeats whose stated level is their real coverage, and whether two cells
differ by more than their noise.

People run 3 to 10 repeats, so the methods are chosen for coverage at those counts:

- A cell's epoch time and images/s: the distribution-free order-statistic interval of the
  median, [x_(k), x_(n+1-k)] of the n sorted repeats. For any continuous distribution it holds
  the true median with probability exactly 1 - 2·P(Binomial(n, 1/2) <= k - 1), whatever the
  shape (timings are skewed and have slow outliers), and it always contains the median shown.
  The narrowest k whose level reaches the asked LEVEL is used; when none does (95 % needs 6
  repeats), [min, max] is given at its own lower level and labelled as short of the one asked:
  3 repeats give a 75 % interval, never a "95 %" one.
- Speedup and efficiency (a ratio of two cells, so both cells' noise counts): the Welch t
  interval on the difference of the mean logs of the cell's and the baseline's repeats,
  exponentiated. A ratio has no distribution-free interval at these counts (the
  Hodges-Lehmann interval of a shift reaches at most 90 % with 3 + 3 repeats); Welch on logs is
  exact for log-normal timings and near its level for normal ones with realistic spread
  (tests/unit/analysis/test_coverage.py measures both at 3, 5 and 10 repeats).

"Within noise": two cells are called different only when their intervals do not overlap.
`noise.false_call_rate` gives, for two order-statistic intervals, how often that calls a difference
between two cells of one true distribution (10 % with 3 repeats each).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from hpcscale.model.scaling_metric import ScalingMetric, metric_of

LEVEL = 0.95  # the level asked for; an interval's own level is what it can support
MEDIAN_METHOD = "order-statistic interval of the median"
RATIO_METHOD = "Welch t interval on the log ratio of the cell's and the baseline's repeats"
# Metric -> the method of its interval columns `<m>_lo`, `<m>_hi`, `<m>_level` (with_intervals).
METHODS: dict[str, str] = {
    "epoch_time_s": MEDIAN_METHOD,
    "images_per_s": MEDIAN_METHOD,
    "speedup": RATIO_METHOD,
    "efficiency": RATIO_METHOD,
}
INTERVAL_METRICS: tuple[str, ...] = tuple(METHODS)


def method_of(metric: str) -> str:
    """The method of `metric`'s interval: a ratio's, else a folded column's median (a command's
    own metric, `samples_per_s`, is folded over its repeats like images/s)."""
    return METHODS.get(metric, MEDIAN_METHOD)


def interval_metrics(metric: ScalingMetric | str | None = None) -> tuple[str, ...]:
    """The columns with_intervals gives intervals: the campaign's time and throughput (its
    scaling metric's, `metric_of`), speedup and efficiency."""
    m = metric_of(metric)
    return (m.time_column, m.throughput_column, "speedup", "efficiency")


NAMES: dict[str, str] = {
    "epoch_time_s": "epoch time",
    "images_per_s": "images/s",
    "speedup": "speedup",
    "efficiency": "efficiency",
}


@dataclass(frozen=True)
class Interval:
    """An interval with what it is: its method, its actual level (NaN: none) and the repeats
    behind it (one count, or the cell's and the baseline's for a ratio)."""

    lo: float
    hi: float
    level: float
    method: str
    repeats: tuple[int, ...]
    asked: float = LEVEL

    @property
    def present(self) -> bool:
        return bool(np.isfinite(self.lo) and np.isfinite(self.hi))

    @property
    def short(self) -> bool:
        """Whether the repeats could not support the level asked (the level is below it)."""
        return self.present and self.level < self.asked - 1e-12

    def describe(self) -> str:
        """ "[lo, hi], 75 % order-statistic interval of the median, 3 repeats (...)"."""
        reps = " + ".join(str(n) for n in self.repeats)
        if not self.present:
            return f"no interval ({reps} repeat(s): {_none_reason(self.method)})"
        said = f"[{self.lo:.4g}, {self.hi:.4g}], {pct(self.level)} {self.method}, {reps} repeats"
        return said + (f" ({shortfall(self.repeats[0], self.asked)})" if self.short else "")


def pct(level: float) -> str:
    """A level as a reader sees it: 0.75 -> '75 %', 0.9375 -> '93.8 %'."""
    return f"{100.0 * level:.3g} %"


def _none_reason(method: str) -> str:
    if method == RATIO_METHOD:
        return "needs two or more repeats of both the cell and its baseline"
    return "needs two or more repeats"


# -- the median: order statistics -----------------------------------------------------------------


def median_coverage(n: int, k: int) -> float:
    """Exact coverage of [x_(k), x_(n+1-k)] for the median of a continuous distribution:
    1 - 2·P(Binomial(n, 1/2) <= k - 1)."""
    if n < 2 or not 1 <= k <= n // 2:
        return math.nan
    tail = sum(math.comb(n, i) for i in range(k)) / 2.0**n
    return 1.0 - 2.0 * tail


def median_rank(n: int, level: float = LEVEL) -> tuple[int, float]:
    """(k, coverage): the narrowest [x_(k), x_(n+1-k)] whose coverage reaches `level`, else
    k = 1 ([min, max]) with its lower coverage. (0, NaN) below two repeats."""
    if n < 2:
        return 0, math.nan
    best = 1
    for k in range(2, n // 2 + 1):
        if median_coverage(n, k) >= level:
            best = k
        else:
            break
    return best, median_coverage(n, best)


def repeats_needed(level: float = LEVEL) -> int:
    """The fewest repeats whose [min, max] reaches `level` (6 for 95 %, 5 for 90 %)."""
    n = 2
    while median_coverage(n, 1) < level:
        n += 1
    return n


def shortfall(n: int, level: float = LEVEL) -> str:
    """What an order-statistic interval of `n` repeats cannot say."""
    return f"{n} repeats cannot support {pct(level)}: {repeats_needed(level)} are needed"


def median_intervals(
    samples: npt.ArrayLike, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray, float]:
    """Row-wise order-statistic intervals of the median: `samples` is (campaigns, n), every row
    n finite repeats. Returns (lo, hi, coverage); NaN with fewer than two repeats."""
    x = np.sort(np.atleast_2d(np.asarray(samples, dtype=float)), axis=1)
    n = x.shape[1]
    k, cover = median_rank(n, level)
    if k == 0:
        nan = np.full(x.shape[0], np.nan)
        return nan, nan.copy(), math.nan
    return x[:, k - 1], x[:, n - k], cover


def median_interval(samples: npt.ArrayLike, level: float = LEVEL) -> Interval:
    """A cell's order-statistic interval of the median (non-finite values are left out)."""
    x = _finite(samples)
    lo, hi, cover = median_intervals(x[None, :], level)
    return Interval(float(lo[0]), float(hi[0]), cover, MEDIAN_METHOD, (x.size,), level)


# -- a ratio of two cells: Welch t on logs --------------------------------------------------------


def log_ratio_intervals(
    numerator: npt.ArrayLike, denominator: npt.ArrayLike, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise Welch t intervals of the ratio of the two samples' geometric means:
    exp(d ± t·se), d = mean log a - mean log b, se² = var(log a)/n_a + var(log b)/n_b,
    Welch–Satterthwaite degrees of freedom. Rows are (campaigns, n_a) and (campaigns, n_b);
    NaN with fewer than two repeats on either side or a value <= 0. Identical repeats on
    both sides give the point itself."""
    a = np.atleast_2d(np.asarray(numerator, dtype=float))
    b = np.atleast_2d(np.asarray(denominator, dtype=float))
    na, nb = a.shape[1], b.shape[1]
    rows = max(a.shape[0], b.shape[0])
    if na < 2 or nb < 2:
        return np.full(rows, np.nan), np.full(rows, np.nan)
    from scipy import stats  # heavy import (~0.5 s): only when there is an interval to compute

    with np.errstate(divide="ignore", invalid="ignore"):
        la = np.where(a > 0, np.log(a), np.nan)
        lb = np.where(b > 0, np.log(b), np.nan)
        va = la.var(axis=1, ddof=1) / na
        vb = lb.var(axis=1, ddof=1) / nb
        se = np.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
        t = np.where(se > 0, stats.t.ppf(0.5 + level / 2.0, df), 0.0)
        d = la.mean(axis=1) - lb.mean(axis=1)
        return np.exp(d - t * se), np.exp(d + t * se)


def ratio_interval(
    numerator: npt.ArrayLike, denominator: npt.ArrayLike, level: float = LEVEL
) -> Interval:
    """The interval of numerator / denominator (e.g. speedup: the baseline's epoch times over
    the cell's), both cells' repeats counted; non-finite values are left out."""
    a, b = _finite(numerator), _finite(denominator)
    lo, hi = log_ratio_intervals(a[None, :], b[None, :], level)
    ok = bool(np.isfinite(lo[0]) and np.isfinite(hi[0]))
    return Interval(
        float(lo[0]), float(hi[0]), level if ok else math.nan, RATIO_METHOD, (a.size, b.size), level
    )


# -- cells ---------------------------------------------------------------------------------------


def with_intervals(
    cells: pd.DataFrame,
    runs: pd.DataFrame,
    level: float = LEVEL,
    metric: ScalingMetric | str | None = None,
) -> pd.DataFrame:
    """Add `<m>_lo`, `<m>_hi`, `<m>_level` (the interval's actual level, NaN without one) for
    `interval_metrics(metric)` and `base_repeats` (the baseline's repeats behind a ratio) to derived
    cells (needs `run_ids`, `group`, `axis_value`, `nodes`, `scale`, `scaling`), from the
    per-run values in `runs` (run_id, the time and throughput columns). The baseline cell's speedup
    is 1 by definition: no interval.

    Vectorised: cells with the same number of finite repeats (and, for a ratio, the same pair
    of counts) are one row-wise call, so the cost is linear in cells, not a call per cell."""
    time, thr = metric_of(metric).time_column, metric_of(metric).throughput_column
    metrics = interval_metrics(metric)
    out = cells.copy()
    for m in metrics:
        for part in ("lo", "hi", "level"):
            out[f"{m}_{part}"] = np.nan
    out["base_repeats"] = np.nan
    if out.empty or "run_ids" not in out.columns:
        return out
    per_run = runs.drop_duplicates("run_id").set_index("run_id")
    found: dict[str, np.ndarray] = {m: np.full((len(out), 3), np.nan) for m in metrics}
    padded = {m: _padded(out["run_ids"], per_run, m) for m in (time, thr)}
    for m, (mat, counts) in padded.items():
        for n in np.unique(counts[counts >= 2]):
            rows = np.flatnonzero(counts == n)
            lo, hi, cover = median_intervals(mat[rows, :n], level)
            found[m][rows] = np.column_stack([lo, hi, np.full(len(rows), cover)])
    pos = pd.Series(np.arange(len(out)), index=out.index)
    base = out.sort_values(["group", "axis_value", "nodes"], kind="stable").groupby("group").head(1)
    base_pos = out["group"].map(pd.Series(pos[base.index].to_numpy(), index=base["group"]))
    base_pos = base_pos.to_numpy(dtype=np.int64)
    # what the speedup divides (add_scaling_metrics' `speedup_on`): times, or throughputs
    on = out.get("speedup_on")
    strong = (on == "time" if on is not None else out["scaling"] == "strong").to_numpy(bool)
    problem = out.get("baseline_problem", pd.Series(None, index=out.index)).map(
        lambda v: isinstance(v, str)
    )
    speedup = pd.to_numeric(out.get("speedup", pd.Series(1.0, index=out.index)), errors="coerce")
    ratio = (
        out["scaling"].isin(["weak", "strong"]).to_numpy()
        & (base_pos != np.arange(len(out)))  # the baseline itself: 1 by definition
        & ~problem.to_numpy(dtype=bool)  # no valid baseline: no speedup, so no interval either
        & speedup.notna().to_numpy()
    )
    # on time: T_b / T_N on the times; else the cell's images/s over the baseline's
    num_pos = np.where(strong, base_pos, np.arange(len(out)))
    den_pos = np.where(strong, np.arange(len(out)), base_pos)
    n_num = np.where(strong, padded[time][1][num_pos], padded[thr][1][num_pos])
    n_den = np.where(strong, padded[time][1][den_pos], padded[thr][1][den_pos])
    base_n = np.where(strong, n_num, n_den).astype(float)
    for is_strong, m in ((True, time), (False, thr)):
        mat = padded[m][0]
        chosen = ratio & (strong == is_strong)
        for na, nb in set(zip(n_num[chosen].tolist(), n_den[chosen].tolist(), strict=True)):
            rows = np.flatnonzero(chosen & (n_num == na) & (n_den == nb))
            lo, hi = log_ratio_intervals(mat[num_pos[rows], :na], mat[den_pos[rows], :nb], level)
            ok = np.isfinite(lo) & np.isfinite(hi)
            found["speedup"][rows] = np.column_stack([lo, hi, np.where(ok, level, np.nan)])
            scale = np.where(ok, out["scale"].to_numpy(float)[rows], np.nan)
            found["efficiency"][rows] = np.column_stack(
                [lo / scale, hi / scale, np.where(ok, level, np.nan)]
            )
    for m, arr in found.items():
        for j, part in enumerate(("lo", "hi", "level")):
            out[f"{m}_{part}"] = arr[:, j]
    out["base_repeats"] = np.where(ratio, base_n, np.nan)
    return out


def _padded(
    run_ids: pd.Series, per_run: pd.DataFrame, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's finite values of `metric` (over its `run_ids` found in `per_run`), sorted
    and left-aligned in a NaN-padded (cells, most repeats) matrix, and each cell's count."""
    ids = [_ids(v) for v in run_ids]
    lengths = np.fromiter((len(v) for v in ids), dtype=np.int64, count=len(ids))
    flat = [r for v in ids for r in v]
    values = (
        pd.to_numeric(per_run[metric], errors="coerce").reindex(flat).to_numpy(float)
        if metric in per_run.columns and flat
        else np.full(len(flat), np.nan)
    )
    owner = np.repeat(np.arange(len(ids)), lengths)
    keep = np.isfinite(values)
    owner, values = owner[keep], values[keep]
    order = np.lexsort((values, owner))
    owner, values = owner[order], values[order]
    counts = np.bincount(owner, minlength=len(ids))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(ids) else counts
    col = np.arange(len(owner)) - np.repeat(starts, counts)
    mat = np.full((len(ids), max(int(counts.max(initial=0)), 1)), np.nan)
    mat[owner, col] = values
    return mat, counts


def _ids(value: object) -> list[str]:
    """A cell's run ids (a list; a comma-joined text; nothing for a missing value)."""
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    if isinstance(value, list | tuple | np.ndarray | pd.Series):
        return list(value)
    return []


def interval(row: pd.Series | Mapping[str, object], metric: str) -> tuple[float, float]:
    """A cell's (lo, hi) for `metric`, NaN when it has none (a row, or its dict)."""
    return (
        float(row.get(f"{metric}_lo", np.nan)),
        float(row.get(f"{metric}_hi", np.nan)),
    )


def interval_of(
    row: pd.Series | Mapping[str, object], metric: str, level: float = LEVEL
) -> Interval:
    """A cell's interval for `metric` with its method, level and repeats, for labels."""
    lo, hi = interval(row, metric)
    reps = int(row.get("repeats") or 0)
    repeats: tuple[int, ...] = (reps,)
    if method_of(metric) == RATIO_METHOD:
        base = row.get("base_repeats", np.nan)
        repeats = (reps, int(base) if pd.notna(base) else 0)
    got = float(row.get(f"{metric}_level", np.nan))
    return Interval(lo, hi, got, method_of(metric), repeats, level)


def labelled(row: pd.Series | Mapping[str, object], metric: str) -> str:
    """ "[lo, hi] (75 %)" for a table cell: the interval with its own level; '' without one."""
    iv = interval_of(row, metric)
    return f"[{iv.lo:.4g}, {iv.hi:.4g}] ({pct(iv.level)})" if iv.present else ""


def note(
    cells: pd.DataFrame,
    metrics: Iterable[str],
    level: float = LEVEL,
    scaling_metric: ScalingMetric | None = None,
) -> str:
    """A caption naming each interval's method and the levels the cells' repeats give:
    'Images/s: order-statistic interval of the median (distribution-free): 75 % with 3
    repeats (3 repeats cannot support 95 %: 6 are needed).' Empty when no cell has one. A
    campaign's own metric (`scaling_metric`) is named by its heading."""
    own = metric_of(scaling_metric)
    said = []
    by_method: dict[str, list[str]] = {}
    for m in metrics:
        if f"{m}_lo" in cells.columns and cells[f"{m}_lo"].notna().any():
            by_method.setdefault(method_of(m), []).append(m)
    for method, ms in by_method.items():
        names = " and ".join(_name(m, own) for m in ms)
        if _name(ms[0], own) == NAMES.get(ms[0]):  # "Epoch time", never "Samples_per_s"
            names = names[0].upper() + names[1:]
        with_one = cells[cells[f"{ms[0]}_lo"].notna()]
        if method == MEDIAN_METHOD:
            counts = sorted({int(n) for n in with_one["repeats"]})
            levels = []
            for n in counts:
                cover = median_rank(n, level)[1]
                short = f" ({shortfall(n, level)})" if cover < level - 1e-12 else ""
                levels.append(f"{pct(cover)} with {n} repeats{short}")
            said.append(
                f"{names}: {method} (distribution-free, exact level): " + "; ".join(levels) + "."
            )
        else:
            said.append(
                f"{names}: {pct(level)} {method} (both cells' noise "
                "counts); none where the cell or its baseline ran once."
            )
    return " ".join(said)


def _name(metric: str, own: ScalingMetric) -> str:
    """How a caption names a column's interval: the campaign's own metric by its heading."""
    if metric in NAMES and (own.usual or metric != own.name):
        return NAMES[metric]
    return own.heading if metric == own.name else metric


def short_label(rows: pd.DataFrame, metric: str, level: float = LEVEL) -> str | None:
    """A figure legend's name for `metric`'s error bars, with the levels drawn: '75 % order-
    statistic interval of the median (3 repeats)'; None when no row has an interval."""
    if f"{metric}_lo" not in rows.columns or not rows[f"{metric}_lo"].notna().any():
        return None
    if method_of(metric) == RATIO_METHOD:
        return f"{pct(level)} Welch t interval (log ratio; cell and baseline repeats)"
    counts = sorted({int(n) for n in rows.loc[rows[f"{metric}_lo"].notna(), "repeats"]})
    if len(counts) == 1:
        return f"{pct(median_rank(counts[0], level)[1])} {MEDIAN_METHOD} ({counts[0]} repeats)"
    levels = ", ".join(f"{pct(median_rank(n, level)[1])} with {n} repeats" for n in counts)
    return f"{MEDIAN_METHOD} ({levels})"


def _finite(samples: npt.ArrayLike) -> np.ndarray:
    a = np.asarray(samples, dtype=float).ravel()
    return a[np.isfinite(a)]
