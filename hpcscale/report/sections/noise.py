"""Comparisons between cells that differ only in a knob (strategy, MPI flavour, fusion, ...): one
is called faster only when the confidence intervals of their throughput do not overlap."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis.intervals import INTERVAL_NAME, interval, verdict
from hpcscale.analysis.tables import axis_label
from hpcscale.core.vocab import KNOBS
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
METRIC = "images_per_s"
NO_INTERVAL = "no interval (no repeats): cannot tell which is faster"


def comparisons(cells: pd.DataFrame) -> pd.DataFrame:
    """Per set of cells equal in SAME but for a knob: the fastest (median images/s) against each
    other, with the verdict: 'A faster than B' only when the intervals do not overlap."""
    knobs = [c for c in (*KNOBS, "tasks_per_node", "threads_per_task") if c in cells.columns]
    rows = []
    if cells.empty:
        return pd.DataFrame()
    same = [c for c in SAME if c in cells.columns]
    for _, sub in cells.groupby(same, dropna=False, sort=True):
        if len(sub) < 2 or len(sub[knobs].map(str).drop_duplicates()) < 2:
            continue
        sub = sub.sort_values(METRIC, ascending=False, kind="stable")
        names = labels(sub, KNOB_PARTS)
        best, best_name = sub.iloc[0], names[0]
        for (_, other), name in zip(sub.iloc[1:].iterrows(), names[1:], strict=True):
            said = verdict(
                float(best[METRIC]),
                interval(best, METRIC),
                float(other[METRIC]),
                interval(other, METRIC),
                higher_is_better=True,
            )
            rows.append(
                {
                    "Model": best["model"],
                    axis_label(cells): best.get("axis_value", best["ranks"]),
                    "A": best_name,
                    "B": name,
                    "Images/s A": best[METRIC],
                    "Images/s B": other[METRIC],
                    "A interval": _fmt(interval(best, METRIC)),
                    "B interval": _fmt(interval(other, METRIC)),
                    "Verdict": _say(said, best_name, name),
                }
            )
    return pd.DataFrame(rows)


def comparison_table(cells: pd.DataFrame, key: str = "comparisons") -> Table | None:
    """The comparison table with its note naming the interval, or None with nothing to compare."""
    frame = comparisons(cells)
    if frame.empty:
        return None
    return Table(
        key,
        "Which setting is faster (throughput), within noise or not",
        frame,
        f"Interval: {INTERVAL_NAME}. Cells whose intervals overlap are within noise; without "
        "repeats there is no interval and no cell is called faster.",
    )


def _fmt(ci: tuple[float, float]) -> str:
    lo, hi = ci
    return f"[{lo:.4g}, {hi:.4g}]" if lo == lo and hi == hi else "–"


def _say(said: str, a: str, b: str) -> str:
    if said == "faster":
        return f"{a} faster than {b}"
    if said == "slower":
        return f"{b} faster than {a}"
    if said == "within noise":
        return "within noise (intervals overlap)"
    return NO_INTERVAL
