"""The training sections: learning curves per epoch, one line per scale (Nelson's accuracy
plots, the GANs' losses), epochs to the validation-accuracy plateau against GPUs (Nelson's last
figure), and the last sample grid of each GAN run (as Ahmad & Cai and Murthy showed them).

The curves are `analysis.curves`; the plateau is `analysis.targets` (the same rule as the
time-to-target section). The sample grids are the one figure read from disk
(`figures.samples.read_grids`): a grid that is gone or unreadable is named in the notes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis.curves import gaps, has_accuracy, learning_curves, per_epoch
from hpcscale.analysis.frame import normalise
from hpcscale.analysis.metric import command_rows
from hpcscale.analysis.studies import NELSON
from hpcscale.analysis.tables import with_args
from hpcscale.analysis.targets import campaign_targets, target_lines
from hpcscale.report import labels as lbl
from hpcscale.report.figures.fold import spaced
from hpcscale.report.figures.samples import GridPanel, last_grids, read_grids, sample_grids
from hpcscale.report.figures.training import (
    epochs_to_plateau,
    scale_axis,
    scale_label,
    scale_labels,
)
from hpcscale.report.figures.training import (
    learning_curves as curves_figure,
)
from hpcscale.report.model import Plot, Section, Table, plot_if
from hpcscale.report.sections.targets import PLATEAU_RULE

FINAL_COLUMNS: dict[str, str] = {
    "train_loss": "Training loss",
    "loss": "Loss",
    "val_loss": "Validation loss",
    "train_accuracy": "Training accuracy",
    "val_accuracy": "Validation accuracy",
}
FOLDING = (
    "Each point is the median, at that epoch, over the cell's repeats that recorded a finite "
    "value there (a single run: its own value)."
)
NO_FILL = "Epochs with no finite value are left as gaps, never interpolated"


def group_names(cells: pd.DataFrame) -> dict[int, str]:
    """A label per line group naming what differs between groups (the model when nothing)."""
    firsts = cells.sort_values("group", kind="stable").groupby("group").head(1)
    return {int(k): v for k, v in lbl.group_labels(firsts).items()}


def final_table(cells: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """Per cell: its scale and the median value of each metric at its last epoch (NaN when
    that epoch is a gap), with the plateau epoch added by the caller. Built with one groupby
    over the curves (not a filter of the curves per cell: quadratic in cells)."""
    axis = scale_axis(cells)
    present = set(curves["metric"].tolist())  # once: not a set of the whole column per name
    metrics = [m for m in FINAL_COLUMNS if m in present]
    metrics += sorted(present - set(FINAL_COLUMNS))
    ordered = cells.sort_values(["group", axis, "nodes"], kind="stable")
    last = curves.groupby("cell")["epoch"].max()
    at_last = curves[curves["epoch"].to_numpy() == curves["cell"].map(last).to_numpy()]
    # the repeats behind the last-epoch values (fewer: some repeats stopped early)
    runs_last = at_last.groupby("cell")["runs"].max()
    ends = curves.sort_values(["cell", "metric", "epoch"], kind="stable")
    ends = ends.groupby(["cell", "metric"], sort=False).tail(1)  # each metric's own last epoch
    values = ends.pivot(index="cell", columns="metric", values="value")
    ids = ordered["cell"].astype(int)
    table = pd.DataFrame(
        {
            "Model": ordered["model"].to_numpy(object),
            "GPUs" if axis == "gpus" else "Ranks": ordered[axis].astype(int).to_numpy(),
            "Nodes": ordered["nodes"].astype(int).to_numpy(),
            "Repeats": ordered["repeats"].astype(int).to_numpy(),
            "Epochs": ids.map(last).astype(int).to_numpy(),
            "Runs at last epoch": ids.map(runs_last).astype(int).to_numpy(),
        }
    )
    for m in metrics:
        got = values[m] if m in values.columns else pd.Series(dtype=float)
        table[f"{FINAL_COLUMNS.get(m, m)} (last epoch)"] = ids.map(got).to_numpy(float)
    table["cell"] = ids.to_numpy()
    return with_args(table, ordered)  # a swept argument: a column after Model


def gap_text(cells: pd.DataFrame, curves: pd.DataFrame) -> str:
    found = gaps(curves)
    if found.empty:
        return f"{NO_FILL}; none here."
    names = scale_labels(cells)
    said = "; ".join(
        f"{names[int(g['cell'])]} {g['metric']} epoch(s) {', '.join(map(str, g['epochs']))}"
        for _, g in found.iterrows()
    )
    return f"{NO_FILL}: {said}."


def curve_source(runs: pd.DataFrame) -> str:
    """Where the per-epoch values come from: a bundled program's metrics.json, a command's
    output as its extractors read it, or both."""
    own = command_rows(runs)
    said = ["metrics.json"] if not own.all() else []
    if own.any():
        said.append("your program's output, read by its extractors (`workload.metrics`)")
    return "; ".join(said)


def training_section(runs: pd.DataFrame, notes: list[str]) -> Section | None:
    """Learning curves per line group, a final-epoch table, and epochs to the plateau."""
    cells, curves, skipped = learning_curves(runs)
    if skipped:
        notes.append(
            f"learning curves: no per-epoch loss or accuracy recorded for run(s) "
            f"{', '.join(skipped)}: not drawn"
        )
    if curves.empty or not curves["value"].notna().any():
        return None
    names = group_names(cells)
    plots = []
    drawn = set(spaced(sorted(names)))  # at most MAX_FIGURES figures, across the whole sweep
    # the drawn groups' cells only: a frame per group of a 1,000-run sweep was most of this (#28)
    for gid, gcells in cells[cells["group"].isin(drawn)].groupby("group", sort=True):
        if gid not in drawn:
            continue
        gcurves = curves[curves["group"] == gid]
        fig = curves_figure(gcells, gcurves)
        if fig is None:
            continue
        several = len(names) > 1
        reps = sorted(set(gcells["repeats"]))
        caption = (
            "One line per scale (colour); training solid, validation dashed. "
            + (FOLDING + " " if max(reps) > 1 else "")
            + gap_text(gcells, gcurves)
        )
        plots.append(
            Plot(
                f"learning_curves_{gid}" if several else "learning_curves",
                "Learning curves per epoch" + (f": {names[int(gid)]}" if several else ""),
                fig,
                caption,
            )
        )
    table = final_table(cells, curves)
    source = curve_source(runs)
    text = [
        f"Per-epoch values as the runs recorded them ({source}), one line per scale: "
        f"{NELSON} compared the training and validation accuracy of 1, 2 and 4 GPUs this way. "
        "Accuracy is a fraction (1 = every image right)."
        if has_accuracy(curves)
        else f"Each loss per epoch as the runs recorded them ({source}), one line per scale "
        "(a GAN's g_loss is the generator's, d_loss the discriminator's)."
    ]
    if len(drawn) < len(names):
        text.append(
            f"Learning curves of {len(drawn)} of {len(names)} line groups drawn (evenly spaced "
            "through the sweep: more figures would not be read); every group's last epoch is in "
            "the table below."
        )
    early = table[table["Runs at last epoch"] < table["Repeats"]]
    if len(early):
        scales = scale_labels(cells)
        text.append(
            "Runs at last epoch: the repeats behind the last-epoch values; fewer than Repeats "
            "where some repeats stopped early ("
            + ", ".join(f"{r['Model']} at {scales[int(r['cell'])]}" for _, r in early.iterrows())
            + ")."
        )
    classifiers, no_val = _without_val_accuracy(runs)
    if classifiers and len(no_val) == len(classifiers):
        said = f"no validation accuracy recorded (runs {', '.join(no_val)})"
        text.append(f"{said[0].upper()}{said[1:]}: epochs to plateau not measured.")
        notes.append(f"{said}: epochs to plateau not measured")
    elif classifiers:
        if no_val:
            notes.append(
                f"no validation accuracy recorded (runs {', '.join(no_val)}): "
                "their epochs to plateau not measured"
            )
        found = campaign_targets(runs)
        plateau = found.cells
        by_cell = _plateau_by_cell(cells, found.per_run)
        table["Plateau epoch"] = table["cell"].map(by_cell)
        fig = epochs_to_plateau(plateau)
        missing = _not_reached(plateau)
        caption = (
            PLATEAU_RULE + " Median over repeats; bars: min to max of the repeats (a range, "
            "not an interval)."
            + (f" No plateau within the epochs run: {missing}." if missing else "")
        )
        if fig is not None:  # plot_if: what the figure folded is said after the caption
            plots += plot_if("epochs_to_plateau", "Epochs to plateau", fig, caption)
        else:
            notes.append(f"epochs to plateau: no run reached one ({PLATEAU_RULE})")
    table = table.drop(columns="cell")
    tables = [Table("final_epoch", "Last epoch per cell (median over repeats)", table)]
    return Section("training", "Learning curves", text, tables, plots)


def _without_val_accuracy(runs: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(classifier run ids, those that recorded no finite val_accuracy): the plateau is read
    off val_accuracy, so a missing metric is said, never reported as "not reached"."""
    table = normalise(runs)
    family = table.get("model_family", pd.Series([None] * len(table), index=table.index))
    cnn = table[(family == "cnn").to_numpy()]
    values = cnn.get("val_accuracy", pd.Series([None] * len(cnn), index=cnn.index))
    ids = [str(r) for r in cnn["run_id"]]
    missing = [r for r, v in zip(ids, values, strict=True) if not np.isfinite(per_epoch(v)).any()]
    return ids, missing


def _plateau_by_cell(cells: pd.DataFrame, per_run: pd.DataFrame) -> dict[int, float]:
    """Median plateau epoch of each curve cell, from the per-run plateaus (NaN: none)."""
    ids = cells["run_ids"].astype(str).str.split(",")
    runs = pd.DataFrame({"cell": cells["cell"].astype(int).repeat(ids.map(len)).to_numpy()})
    by_run = pd.Series(per_run["plateau_epoch"].to_numpy(float), index=per_run["run_id"])
    by_run = by_run[~by_run.index.duplicated(keep="last")]  # as a dict of the pairs would
    runs["epoch"] = by_run.reindex([r for v in ids for r in v]).to_numpy(float)
    median = runs[np.isfinite(runs["epoch"])].groupby("cell")["epoch"].median()
    return {int(c): float(median.get(c, np.nan)) for c in cells["cell"]}


def _not_reached(plateau: pd.DataFrame) -> str:
    axis = scale_axis(plateau)
    left = plateau[plateau["plateau_epoch"].isna()]
    return ", ".join(f"{r['model']} at {scale_label(r, axis)}" for _, r in left.iterrows())


def samples_section(runs: pd.DataFrame, notes: list[str]) -> Section | None:
    """The last sample grid of each GAN run (and any run that wrote grids), one figure per line
    group; files gone or unreadable go to `notes`, GANs that wrote none too."""
    table = normalise(runs)
    table = table.assign(group=target_lines(table).to_numpy())
    family = table.get("model_family", pd.Series([None] * len(table)))
    listed = table.get("sample_grids", pd.Series([None] * len(table)))
    keep = (family == "gan").to_numpy() | listed.map(lambda v: len(_files(v)) > 0).to_numpy()
    table = table[keep]
    if table.empty:
        return None
    names = group_names(table)
    plots, rows = [], []
    drawn = set(spaced(sorted(names)))  # at most MAX_FIGURES figures, across the whole sweep
    table = table.sort_values(["group", "gpus", "ranks", "nodes", "repeat"], kind="stable")
    # groups not drawn are not read either; a run of theirs without grids is still said
    listed = table.get("sample_grids", pd.Series([None] * len(table), index=table.index))
    none = [last_grids(_files(v)).epoch is None for v in listed]
    unsaid: dict[int, list[str]] = {}
    for gid, rid, missing in zip(table["group"], table["run_id"], none, strict=True):
        if missing and gid not in drawn:
            unsaid.setdefault(int(gid), []).append(
                f"run {rid}: no sample grid recorded (samples/*.png)"
            )
    shown = dict(iter(table[table["group"].isin(drawn)].groupby("group", sort=True)))
    for gid in sorted(set(table["group"])):
        if gid not in drawn:
            notes.extend(unsaid.get(int(gid), []))
            continue
        g = shown[gid]
        axis = scale_axis(g)
        runs_panels, epochs = [], set()
        for _, run in g.iterrows():
            last = last_grids(_files(run.get("sample_grids")))
            if last.epoch is None:
                notes.append(f"run {run['run_id']}: no sample grid recorded (samples/*.png)")
                continue
            epochs.add(last.epoch)
            title = _scale(run, axis, g)
            panels = [
                GridPanel(_panel_title(title, rel, len(last.files), last.epoch), _path(run, rel))
                for rel in last.files
            ]
            notes.extend(f"run {run['run_id']}: {p}" for p in read_grids(panels))
            runs_panels.append(panels)
            rows.append(
                {
                    "Run": run["run_id"],
                    "Model": run["model"],
                    "Scale": title,
                    "Epoch": last.epoch,
                    "Files": ", ".join(last.files),
                    "Decoded": all(p.image is not None for p in panels),
                }
            )
        fig = sample_grids(runs_panels)
        if fig is None:
            continue
        mine = set(g["run_id"])
        when = ", ".join(f"epoch {e}" for e in sorted(epochs))
        plots.append(
            Plot(
                f"samples_{gid}" if len(names) > 1 else "samples",
                f"Last sample grids ({when}): {names[int(gid)]}, {_batch(g.iloc[0])}",
                fig,
                f"Each run's last sample grid ({when}), from a fixed noise (and text) input; "
                + _stage_text(runs_panels)
                + "files: "
                + "; ".join(f"{r['Run']}: {r['Files']}" for r in rows if r["Run"] in mine)
                + ".",
            )
        )
    if not rows:
        return None
    said = ["The last sample grid each GAN run wrote (samples/ in its run directory)."]
    if len(drawn) < len(names):
        said.append(
            f"Sample grids of {len(drawn)} of {len(names)} line groups shown (evenly spaced "
            "through the sweep); every run's grids are in samples/ of its run directory."
        )
    return Section(
        "samples",
        "Sample grids",
        said,
        [Table("sample_grids", "Sample grids shown", pd.DataFrame(rows))],
        plots,
    )


def _stage_text(runs_panels: list[list[GridPanel]]) -> str:
    """Where Stage-I/Stage-II sit. A run with one grid fills the left column too, so when the
    rows mix pairs and single grids the caption points at the panel titles instead."""
    sizes = {len(p) for p in runs_panels}
    if sizes == {1} or not sizes:
        return ""
    if 1 in sizes:
        return (
            "Stage-I beside Stage-II where a run wrote both, a single grid alone where it wrote "
            "one (each panel titled with its stage or epoch), one run a row; "
        )
    return "Stage-I (left) beside Stage-II (right), one run a row; "


def _files(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return [str(v) for v in value]


def _path(run: pd.Series, rel: str) -> Path:
    return Path(str(run["run_dir"])) / rel


def _scale(run: pd.Series, axis: str, group: pd.DataFrame) -> str:
    n = int(run[axis])
    text = f"{n} {'GPU' if axis == 'gpus' else 'rank'}{'s' * (n != 1)}"
    if group["repeat"].nunique() > 1:
        text += f", repeat {int(run['repeat'])}"
    return text


def _panel_title(scale: str, rel: str, files: int, epoch: int) -> str:
    if files > 1:
        return f"{scale}, {'Stage-I' if rel.endswith('_stage1.png') else 'Stage-II'}, ep. {epoch}"
    return f"{scale}, epoch {epoch}"


def _batch(row: pd.Series) -> str:
    if row["scaling"] == "strong":
        return f"global batch {int(row['global_batch'])}"
    return f"batch {int(row['batch_per_rank'])}/rank"
