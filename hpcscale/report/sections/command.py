"""Which program and which extractors produced a command workload's figures: the first thing a
reader of its report needs, since no bundled program stands behind the numbers."""

from __future__ import annotations

import pandas as pd

from hpcscale.report.model import Section, Table

COLUMNS = {
    "command": "Command (placeholders unfilled)",
    "cwd": "Directory",
    "figure_metric": "Scaling metric",
    "figure_unit": "Unit",
    "extractors": "Extractors",
}


def command_section(runs: pd.DataFrame) -> Section | None:
    """One row per distinct command and reading, with the runs that used it; None for a
    campaign of bundled programs only."""
    if "command" not in runs.columns or runs["command"].isna().all():
        return None
    mine = runs[runs["command"].notna()]
    cols = [c for c in COLUMNS if c in mine.columns]
    table = (
        mine[cols]
        .astype(str)
        .groupby(cols, sort=False)
        .size()
        .reset_index(name="Runs")
        .rename(columns=COLUMNS)
    )
    metric = str(mine["figure_metric"].dropna().iloc[0]) if "figure_metric" in mine else ""
    unit = str(mine["figure_unit"].dropna().iloc[0]) if "figure_unit" in mine else ""
    text = [
        "These runs ran your own program under the system's launcher, once per rank; their "
        "figures were read from its output by the extractors below (`metrics:` in the campaign).",
        f"The scaling tables' throughput column (Images/s) holds {metric or 'the chosen metric'}"
        + (f", in {unit}" if unit else "")
        + "; speedup and efficiency are computed on it.",
    ]
    tables = [Table("command", "Command and extractors", table)]
    return Section("command", "Your program", text, tables)
