"""The parameter-count table (Vemparala Narayana Murthy's "Model Parameters"): each network's
size per model, read from the runs' metrics.json (`params`, `param_count`)."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis.params import param_table
from hpcscale.analysis.studies import MURTHY
from hpcscale.report.model import Section, Table


def params_section(runs: pd.DataFrame) -> Section | None:
    table = param_table(runs)
    if table.empty:
        return None
    return Section(
        "params",
        "Model parameters",
        [
            "Parameters per network (trainable and frozen) as the runs recorded them, their total, "
            "and the trainable parameters of all networks. Small networks scale less well: "
            f"there is less compute per byte all-reduced ({MURTHY})."
        ],
        [Table("params", "Parameters per model", table)],
    )
