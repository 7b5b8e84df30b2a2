"""Which program and which extractors produced a command workload's figures: the first thing a
reader of its report needs, since no bundled program stands behind the numbers."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis.metric import command_rows
from hpcscale.model.scaling_metric import TIME, ScalingMetric
from hpcscale.report.model import Section, Table

COLUMNS = {
    "command": "Command (placeholders unfilled)",
    "cwd": "Directory",
    "figure_metric": "Scaling metric",
    "figure_unit": "Unit",
    "extractors": "Extractors",
}


def command_section(runs: pd.DataFrame, metric: ScalingMetric | None = None) -> Section | None:
    """One row per distinct command and reading, with the runs that used it; None for a
    campaign of bundled programs only. `metric`: what the scaling tables stand on."""
    own = command_rows(runs)
    if not own.any():
        return None
    metric = metric or ScalingMetric()
    mine = runs[own]
    cols = [c for c in COLUMNS if c in mine.columns]
    table = (
        mine[cols]
        .astype(str)
        .groupby(cols, sort=False)
        .size()
        .reset_index(name="Runs")
        .rename(columns=COLUMNS)
    )
    unit = f", in {metric.unit}" if metric.unit else ""
    if metric.kind == TIME:
        said = (
            f"The scaling tables' time column ({metric.name}) holds {metric.name}{unit} "
            "(`workload.time`); strong-scaling speedup is T_b / T_N on it."
        )
    else:
        said = (
            f"The scaling tables' throughput column ({metric.heading}) holds {metric.name}{unit}"
            "; speedup and efficiency are computed on it."
        )
    text = [
        "These runs ran your own program under the system's launcher, once per rank; their "
        "figures were read from its output by the extractors below (`metrics:` in the campaign).",
        said,
    ]
    tables = [Table("command", "Command and extractors", table)]
    return Section("command", "Your program", text, tables)
