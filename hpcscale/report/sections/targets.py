"""The time-to-target section: how long each cell trains to the campaign's common target loss
and to its validation-accuracy plateau (the choices are `analysis.targets.campaign_targets`)."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.targets import PLATEAU_TOL, PLATEAU_WINDOW, campaign_targets
from hpcscale.report import figures
from hpcscale.report.labels import with_setting
from hpcscale.report.model import Section, Table, plot_if

# Table column -> cell column, to name the setting of cells the table's columns do not tell
# apart (two strategies at the same ranks).
MATCH: dict[str, str] = {
    "Model": "model",
    "Ranks": "ranks",
    "Batch/rank": "batch_per_rank",
    "Global batch": "global_batch",
    "Time to target (s)": "time_to_target_s",
    "Time to plateau (s)": "time_to_plateau_s",
}


def target_section(runs: pd.DataFrame, notes: list[str]) -> Section | None:
    found = campaign_targets(runs)
    if not found.measured:
        notes.append("time to target: no per-epoch losses or validation accuracies recorded")
        return None
    key, target, cells = found.loss_key, found.target, found.cells
    text = []
    if target is not None:
        text.append(
            f"Target: {key} ≤ {target:.4g}, the worst run's best {key}, so every run reaches "
            "it; the time is the wall time of the epochs up to the first one at or below it."
        )
    if found.per_run["time_to_plateau_s"].notna().any():
        text.append(
            f"Plateau: the first epoch opening {PLATEAU_WINDOW} epochs all within {PLATEAU_TOL:g} "
            "of the run's best validation accuracy."
        )
    table = with_setting(
        tables.time_to_target_table(cells),
        cells,
        MATCH,
        ["model", "device", "ranks", "batch_per_rank", "global_batch"],
    )
    return Section(
        "targets",
        "Time to target",
        text,
        [Table("time_to_target", "Time to target (median over repeats)", table)],
        plot_if(
            "time_to_target",
            "Time to target against ranks",
            figures.time_to_target(cells, key or "loss", target),
        ),
    )
