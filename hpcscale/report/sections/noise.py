"""What the noise over repeats allows the report to say: the paragraph explaining its intervals
(method, real level, how often "faster" is said of two equal cells), and the comparisons between
cells that differ only in a knob (strategy, MPI flavour, fusion, ...): one is called faster only
when the intervals of their throughput (a `time:` campaign's time) do not overlap."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis.intervals import (
    LEVEL,
    MEDIAN_METHOD,
    interval,
    labelled,
    median_rank,
    method_of,
    note,
    pct,
    repeats_needed,
)
from hpcscale.analysis.memo import FrameMemo
from hpcscale.analysis.metric import compared_on
from hpcscale.analysis.noise import false_call_rate, verdict
from hpcscale.analysis.tables import axis_label
from hpcscale.model.scaling_metric import BUNDLED_METRIC, ScalingMetric
from hpcscale.model.vocab import KNOBS, arg_columns
from hpcscale.report.labels import KNOB_PARTS, labels
from hpcscale.report.model import Table

# Cells compared are equal in all of these; they differ in a knob or the CPU layout.
SAME: tuple[str, ...] = (
    "model",
    "scaling",
    "device",
    "nodes",
    "ranks",
    "batch_per_rank",
    "global_batch",
)
NO_INTERVAL = "no interval (no repeats): cannot tell which is faster"
COUNTS_SHOWN = (3, 5, 10)  # repeat counts whose levels the explanation always gives
# comparisons by the cells they compare (#28): the scaling section compares every cell and a
# sweep's knob section (its fusion sweep holds every cell) the same ones again; a sweep of
# 1,000 cells paid for it twice. Each caller gets its own copy.
_COMPARED: FrameMemo[pd.DataFrame] = FrameMemo(lambda frame: frame.copy(), by_value=True)


def method_text(cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> str | None:
    """The paragraph explaining the intervals over repeats, with the levels and false-call
    rates of the repeat counts these cells have; None when no cell has an interval."""
    # the medians' intervals: the metric's time and throughput, or every campaign's (compare)
    lows = [
        c
        for c in cells.columns
        if isinstance(c, str) and c.endswith("_lo") and method_of(c[:-3]) == MEDIAN_METHOD
    ]
    if not any(cells[c].notna().any() for c in lows):
        return None
    counts = sorted({*COUNTS_SHOWN, *(int(n) for n in cells["repeats"] if n >= 2)})
    levels = ", ".join(f"{pct(median_rank(n)[1])} with {n}" for n in counts)
    had = sorted({int(n) for n in cells["repeats"] if n >= 2})
    calls = ", ".join(f"{pct(false_call_rate(n, n))} of the time with {n} each" for n in had)
    medians = _medians(cells, metric)
    return (
        f"Intervals over repeats state the level they really have. A cell's {medians}: "
        "the order-statistic interval of the median, [x₍ₖ₎, x₍ₙ₊₁₋ₖ₎] of its n sorted "
        "repeats, which holds the true median with a probability the binomial distribution "
        "fixes whatever the shape of the noise (outliers and skew included): "
        f"{levels} repeats. {pct(LEVEL)} needs at least {repeats_needed(LEVEL)} repeats; with "
        "fewer, [min, max] is given at its own lower level and the table says so. Speedup and "
        "efficiency divide a cell by its baseline, so both cells' repeats count: a "
        f"{pct(LEVEL)} Welch t interval on the difference of their mean logarithms (exact for "
        "log-normal timings, within a few points of its level for normal ones at 3 to 10 "
        "repeats; the ratio of the medians shown may lie outside it in rare skewed cases). "
        "Two cells are called different only when their intervals do not overlap: two cells "
        f"of one true speed are then called different {calls} (order statistics, exact), under "
        "1 % with two Welch intervals (simulated)."
    )


def _medians(cells: pd.DataFrame, metric: ScalingMetric) -> str:
    """How the text names the figures folded into medians: "images/s and epoch time", or the
    campaign's own metric in its place (only those with an interval, when one has none)."""
    thr = metric.throughput_heading
    time = metric.time_name
    said = {
        metric.throughput_column: "images/s" if thr == "Images/s" else thr,
        metric.time_column: "epoch time" if time == "Epoch time" else time,
    }
    shown = [n for c, n in said.items() if f"{c}_lo" in cells and cells[f"{c}_lo"].notna().any()]
    return " and ".join(shown or said.values())


def comparisons(cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> pd.DataFrame:
    """Per set of cells equal in SAME but for a knob: the fastest (median images/s, or the
    shortest median time of a `time:` campaign) against each other, with the verdict: 'A
    faster than B' only when the intervals do not overlap. Computed once per set of cells
    (`_COMPARED`: the same cells, or equal ones, still holding what they held)."""
    key = ("comparisons", metric.throughput_column, metric.time_column)
    return _COMPARED.get(cells, key, lambda: _comparisons(cells, metric))


def _comparisons(cells: pd.DataFrame, own: ScalingMetric = BUNDLED_METRIC) -> pd.DataFrame:
    metric, higher = compared_on(cells, own)
    heading = own.throughput_heading if higher else own.time_heading
    knobs = [c for c in (*KNOBS, "tasks_per_node", "threads_per_task") if c in cells.columns]
    knobs += arg_columns(cells.columns)  # a swept workload argument is compared like a knob
    rows = []
    if cells.empty:
        return pd.DataFrame()
    same = [c for c in SAME if c in cells.columns]
    axis = axis_label(cells)  # once: it reads every cell
    # what a row below reads (its metric, interval and names): a dict of every column per cell
    # was most of the comparisons' time
    read = [
        c
        for c in dict.fromkeys((metric, "model", "ranks", "axis_value", "repeats",
                                "base_repeats", f"{metric}_lo", f"{metric}_hi", f"{metric}_level"))
        if c in cells.columns
    ]  # fmt: skip
    for _, sub in cells.groupby(same, dropna=False, sort=True):
        if len(sub) < 2 or len(sub[knobs].map(str).drop_duplicates()) < 2:
            continue
        sub = sub.sort_values(metric, ascending=not higher, kind="stable")
        names = labels(sub, KNOB_PARTS)
        # dicts, not a Series per row (iterrows): a sweep has hundreds of cells per scale
        best, *others = sub[read].to_dict("records")
        best_name = names[0]
        for other, name in zip(others, names[1:], strict=True):
            said = verdict(
                float(best[metric]),
                interval(best, metric),
                float(other[metric]),
                interval(other, metric),
                higher_is_better=higher,
            )
            rows.append(
                {
                    "Model": best["model"],
                    axis: best.get("axis_value", best["ranks"]),
                    "A": best_name,
                    "B": name,
                    f"{heading} A": best[metric],
                    f"{heading} B": other[metric],
                    "A interval": labelled(best, metric) or "–",
                    "B interval": labelled(other, metric) or "–",
                    "Verdict": _say(said, best_name, name),
                }
            )
    return pd.DataFrame(rows)


def comparison_table(
    cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC, key: str = "comparisons"
) -> Table | None:
    """The comparison table with its note naming the interval, or None with nothing to compare."""
    frame = comparisons(cells, metric)
    if frame.empty:
        return None
    own = metric
    metric, higher = compared_on(cells, own)
    return Table(
        key,
        f"Which setting is faster ({'throughput' if higher else 'time'}), within noise or not",
        frame,
        "Intervals (level in brackets): "
        + note(cells, (metric,), scaling_metric=own)
        + " Cells whose intervals overlap are within noise; without repeats there is no "
        "interval and no cell is called faster.",
    )


def _say(said: str, a: str, b: str) -> str:
    if said == "faster":
        return f"{a} faster than {b}"
    if said == "slower":
        return f"{b} faster than {a}"
    if said == "within noise":
        return "within noise (intervals overlap)"
    return NO_INTERVAL
