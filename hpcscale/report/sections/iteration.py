"""Time per iteration against the batch (Goyal et al.'s Fig. 7): how long one training
step takes as the batch grows, swept at a fixed scale or grown with the ranks (weak scaling)."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis.batch import STEP_SOURCES, iteration_rows
from hpcscale.model.scaling_metric import BUNDLED_METRIC, ScalingMetric
from hpcscale.report import figures
from hpcscale.report.figures.batch import sweep_labels
from hpcscale.report.model import Section, Table, plot_if
from hpcscale.report.sections.quality import mark_flagged

TITLE = "Time per iteration against batch size"


def iteration_section(
    cells: pd.DataFrame, runs: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC
) -> Section | None:
    rows = iteration_rows(cells, runs)
    if rows.empty:
        return None
    weak = bool((rows["line_kind"] == "weak").all())
    text = [
        (
            "Weak scaling: the global batch grows with the ranks (per-rank batch fixed), as in "
            "Goyal et al.'s Fig. 7 (Accurate, Large Minibatch SGD, 2017); ideally the time per "
            "iteration stays flat and the time per epoch falls with the batch."
            if weak
            else "The batch sweeps at a fixed scale: time per iteration against the global batch."
        ),
        f"Time per iteration: the {STEP_SOURCES['p50']} of rank 0 (burn-in excluded) when every "
        f"run of a line recorded it, else the {STEP_SOURCES['epoch']} for the whole line (one "
        "source per line, never mixed); the median over repeats.",
    ]
    plots = plot_if(
        "iteration",
        "Time per iteration and per epoch against the global batch",
        figures.iteration_times(rows, metric),
        "One line per " + ("scaling group" if weak else "batch sweep") + "; left: time per "
        f"iteration ({_sources(rows)}), right: mean epoch time.",
    )
    if not plots:
        text.append("No figure: every line has fewer than three batch sizes (see the table).")
    table = mark_flagged(
        Table("iteration", "Time per iteration", _table(rows, metric)),
        rows,
        {"Model": "model", "Ranks": "ranks", "Global batch": "global_batch"},
    )
    return Section("iteration", TITLE, text, [table], plots)


def _table(rows: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> pd.DataFrame:
    names = sweep_labels(rows, key="line")
    out = pd.DataFrame(
        {
            "Model": rows["model"],
            "Line": [names[i] for i in rows["line"]],
            "CPU/GPU": rows["device"].str.upper(),
            "Ranks": rows["ranks"],
            "Batch/rank": rows["batch_per_rank"],
            "Global batch": rows["global_batch"],
            "Time per iteration (ms)": rows["step_time_ms"],
            "From": rows["step_time_source"],
            metric.time_heading: rows[metric.time_column],
            metric.throughput_heading: rows[metric.throughput_column],
            "Repeats": rows["repeats"],
        }
    ).reset_index(drop=True)
    return out.drop(columns="Line") if rows["line"].nunique() < 2 else out


def _sources(rows: pd.DataFrame) -> str:
    """Which step time each line is drawn from (one per line), for the caption."""
    per_line = rows.groupby("line", sort=True)["step_time_source"].first()
    found = sorted(set(per_line))
    if len(found) == 1:
        return found[0] + (", every line" if len(per_line) > 1 else "")
    names = sweep_labels(rows, key="line")
    return "; ".join(f"{names[i]}: {src}" for i, src in per_line.items())
