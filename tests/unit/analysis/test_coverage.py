"""Issue 19 item 3: an interval's stated level is its real coverage.

Thousands of campaigns are simulated from known distributions (normal, and a skewed log-normal)
at 3, 5 and 10 repeats, and the share of intervals that hold the true value is counted: the
cell's order-statistic interval of the median against the true median, the speedup's Welch t
interval against the true ratio of the two cells' medians. Vectorised (one array per setting),
so it runs in seconds. The expected levels are the binomial ones computed by hand here."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from hpcscale.analysis.derive import derive
from hpcscale.analysis.intervals import (
    LEVEL,
    log_ratio_intervals,
    median_intervals,
    median_rank,
)
from hpcscale.analysis.noise import false_call_rate

CAMPAIGNS = 4000
TOLERANCE = 0.03  # percentage points, as a fraction
# Exact level of the narrowest [x_(k), x_(n+1-k)] reaching 95 %, else [min, max]:
# 1 - 2 * sum_{i<k} C(n, i) / 2^n, by hand.
HAND_LEVELS = {
    3: 1 - 2 * 1 / 8,  # k=1: 75 %, short of 95 %
    5: 1 - 2 * 1 / 32,  # k=1: 93.75 %, short of 95 %
    10: 1 - 2 * (1 + 10) / 1024,  # k=2: 97.85 % (k=3 gives 89.1 %)
}
Draw = Callable[[np.random.Generator, float, int], np.ndarray]


def normal(rng: np.random.Generator, median: float, n: int) -> np.ndarray:
    """Epoch times with a 10 % standard deviation (median = mean)."""
    return rng.normal(median, 0.10 * median, size=(CAMPAIGNS, n))


def lognormal(rng: np.random.Generator, median: float, n: int) -> np.ndarray:
    """Right-skewed times (sigma 0.4 on the log: slow outliers), median exp(mu)."""
    return median * np.exp(rng.normal(0.0, 0.4, size=(CAMPAIGNS, n)))


DISTRIBUTIONS: dict[str, Draw] = {"normal": normal, "lognormal": lognormal}


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_metric_interval_covers_the_median_at_its_stated_level(dist: str, n: int) -> None:
    rng = np.random.default_rng(1900 + n + 50 * (dist == "lognormal"))
    x = DISTRIBUTIONS[dist](rng, 40.0, n)
    lo, hi, level = median_intervals(x, LEVEL)
    assert level == pytest.approx(HAND_LEVELS[n], abs=1e-12)
    coverage = float(np.mean((lo <= 40.0) & (hi >= 40.0)))
    assert abs(coverage - level) <= TOLERANCE, (dist, n, coverage, level)


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_speedup_interval_covers_the_true_speedup_at_its_stated_level(dist: str, n: int) -> None:
    """Strong scaling: speedup = T_baseline / T_N; both cells are noisy (the cell's spread is
    not the baseline's: the log-normal cell is twice as noisy)."""
    rng = np.random.default_rng(2900 + n + 50 * (dist == "lognormal"))
    draw = DISTRIBUTIONS[dist]
    base = draw(rng, 40.0, n)
    cell = draw(rng, 22.0, n)
    if dist == "lognormal":
        cell = 22.0 * (cell / 22.0) ** 2
    lo, hi = log_ratio_intervals(base, cell, LEVEL)
    true = 40.0 / 22.0
    coverage = float(np.mean((lo <= true) & (true <= hi)))
    assert abs(coverage - LEVEL) <= TOLERANCE, (dist, n, coverage)


def test_the_report_uses_the_simulated_methods() -> None:
    """derive()'s cells carry exactly the intervals the simulation measured (weak and strong),
    and a cell whose repeats cannot reach 95 % says its own level."""
    rng = np.random.default_rng(7)
    rows = []
    for scaling in ("weak", "strong"):
        for nodes, t in ((1, 40.0), (2, 22.0)):
            for r, v in enumerate(lognormal(rng, t, 3)[0]):
                rows.append(
                    {"scaling": scaling, "nodes": nodes, "repeat": r, "epoch_time_s": v,
                     "images_per_s": 6400.0 / v, "run_id": f"{scaling}{nodes}-{r}"}
                )  # fmt: skip
    runs = pd.DataFrame(rows).assign(model="m", device="cpu", batch_per_rank=8, global_batch=8)
    runs.loc[runs["scaling"] == "weak", "global_batch"] = 8 * runs["nodes"]
    cells = derive(runs).set_index(["scaling", "nodes"])
    per = runs.set_index(["scaling", "nodes"]).sort_index()
    for scaling in ("weak", "strong"):
        one, two = per.loc[(scaling, 1)], per.loc[(scaling, 2)]
        got = cells.loc[(scaling, 2)]
        lo, hi, level = median_intervals(two["epoch_time_s"].to_numpy()[None, :])
        assert (got["epoch_time_s_lo"], got["epoch_time_s_hi"]) == (lo[0], hi[0])
        assert got["epoch_time_s_level"] == level == 0.75
        if scaling == "strong":
            s = log_ratio_intervals(one["epoch_time_s"].to_numpy(), two["epoch_time_s"].to_numpy())
        else:
            s = log_ratio_intervals(two["images_per_s"].to_numpy(), one["images_per_s"].to_numpy())
        assert got["speedup_lo"] == pytest.approx(s[0][0], rel=1e-12)
        assert got["speedup_hi"] == pytest.approx(s[1][0], rel=1e-12)
        assert got["speedup_level"] == LEVEL and got["base_repeats"] == 3
        assert got["efficiency_hi"] == pytest.approx(s[1][0] / 2, rel=1e-12)


def test_false_calls_of_overlapping_order_statistic_intervals() -> None:
    """Two cells of one distribution called different (intervals apart): hand-counted rank
    arrangements (3 + 3: 2 of C(6, 3) = 20; 5 + 5: 2 of 252), and simulated for 3 + 5."""
    assert false_call_rate(3, 3) == pytest.approx(2 / 20)
    assert false_call_rate(5, 5) == pytest.approx(2 / 252)
    rng = np.random.default_rng(3)
    a = rng.lognormal(0.0, 0.4, size=(20000, 3))
    b = rng.lognormal(0.0, 0.4, size=(20000, 5))
    (alo, ahi, _), (blo, bhi, _) = median_intervals(a), median_intervals(b)
    apart = float(np.mean((ahi < blo) | (bhi < alo)))
    assert apart == pytest.approx(false_call_rate(3, 5), abs=0.006)
    k, level = median_rank(1)  # one run: no interval at all
    assert k == 0 and np.isnan(level)
