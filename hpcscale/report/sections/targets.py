"""The time-to-target section: how long each cell trains to each target (or, for classifiers by
default, to its validation-accuracy plateau), with each target's source printed. GANs have no
default target: the section then says how to set one."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.metric import command_rows
from hpcscale.analysis.targets import PLATEAU_TOL, PLATEAU_WINDOW, campaign_targets
from hpcscale.model.targets import TargetSpec
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
IDENTITY: tuple[str, ...] = ("target", "model", "device", "ranks", "batch_per_rank", "global_batch")
HOW_TO_SET = (
    "Set one in the campaign file (`targets: ['g_loss<=1.2']`) or on the command line "
    "(`hpcscale report NAME --target 'g_loss<=1.2'`, repeatable; `>=` for an accuracy)."
)
# Why a workload kind has no default target (analysis.targets.DEFAULT_TARGETS).
WHY_NO_DEFAULT = {
    "gan": "no single GAN loss falls as the model improves",
    "unknown": "hpcscale cannot tell which of a program's figures measures its progress",
}
OWN_NO_DEFAULT = (
    "No time to target by default: hpcscale cannot tell which of your program's figures measures "
    "its progress. Set a target on a per-epoch series its extractors read (`reduce: series`), "
    "in the campaign file (`targets: ['val_accuracy>=0.8']`) or on the command line (`hpcscale "
    "report NAME --target 'val_accuracy>=0.8'`, repeatable; `<=` for a loss)."
)
CURVES = ("train_loss", "val_loss", "train_accuracy", "val_accuracy", "losses")
PLACEHOLDER_NOTE = (
    " The campaign marks this value a placeholder (`placeholder: true`): it stands in for a "
    "target the study did not give, so times to it are not the study's; set the real one in "
    "`targets:` or with `--target`."
)
PLATEAU_RULE = (
    f"Plateau rule: with best = the run's highest validation accuracy, the plateau epoch is the "
    f"first epoch opening {PLATEAU_WINDOW} consecutive epochs all within {PLATEAU_TOL:g} "
    "(absolute) of best; its time is the wall time of the epochs up to and including it."
)


def target_section(
    runs: pd.DataFrame, notes: list[str], specs: Sequence[TargetSpec] = ()
) -> Section | None:
    found = campaign_targets(runs, specs)
    text: list[str] = []
    for spec in found.specs:
        text.append(
            f"Target: {spec.text} (source: {spec.source or 'given'}); the time is the wall time "
            "of the epochs up to the first one that reaches it."
            + (PLACEHOLDER_NOTE if spec.placeholder else "")
        )
    if found.default:
        text.append(
            "Target: validation accuracy plateau (source: default for classifiers, "
            "model_family cnn). " + PLATEAU_RULE
        )
    own = bool(len(runs)) and bool(command_rows(runs).all())  # the user's own program only
    if own and found.unset and not found.specs:
        if not _has_curves(runs):  # nothing a target could be read from: no section
            notes.append("time to target: your program recorded no per-epoch loss or accuracy")
            return None
        text.append(OWN_NO_DEFAULT)
    elif found.unset and not found.specs:
        kinds = ", ".join(found.unset)
        why = [WHY_NO_DEFAULT[k] for k in found.unset if k in WHY_NO_DEFAULT]
        text.append(
            f"No default target for workload kind(s) {kinds}"
            + (f": {'; '.join(why)}" if why else "")
            + ", so no time to target is shown. "
            + HOW_TO_SET
        )
    if not found.measured:
        if not text:
            notes.append("time to target: no per-epoch losses or validation accuracies recorded")
            return None
        if found.specs:
            text.append("No run reached the target(s).")
        return Section("targets", "Time to target", text)
    cells = found.cells
    table = with_setting(
        tables.time_to_target_table(cells),
        cells,
        MATCH,
        [*IDENTITY, *tables.swept_args(cells)],  # a swept argument: a column of its own
    )
    return Section(
        "targets",
        "Time to target",
        text,
        [Table("time_to_target", "Time to target (median over repeats)", table)],
        plot_if(
            "time_to_target",
            "Time to target against ranks",
            figures.time_to_target(cells),
        ),
    )


def _has_curves(runs: pd.DataFrame) -> bool:
    """Whether any run recorded a per-epoch loss or accuracy (a target could be read off it)."""
    return any(
        not isinstance(v, str) and hasattr(v, "__len__") and len(v) > 0  # a list or an array
        for col in CURVES
        if col in runs.columns
        for v in runs[col]
    )
