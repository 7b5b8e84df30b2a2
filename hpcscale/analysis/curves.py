"""Learning curves: per-epoch losses and accuracies from the run table, one line per scale.

A *line group* is the cells that differ only in scale (`targets.target_lines`: same model,
strategy, knobs, workload arguments and the batch the scaling holds fixed), so two strategies
or two learning rates never share a panel.
Within a group each cell (one scale: nodes, layout, ranks) is one line; its repeats are folded
into the median per epoch over the repeats that recorded a finite value at that epoch.

Nothing is interpolated: an epoch no repeat recorded (a shorter run, a diverged NaN loss) stays
NaN, which a plot draws as a gap; `gaps` names the lines that have one.

Metrics: a classifier's train_loss, val_loss, train_accuracy, val_accuracy; a GAN's named
losses (d_loss, g_loss, kl_loss...). A `losses` entry equal to a recorded train_loss (the
classifier's "loss") is not drawn twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis.frame import normalise
from hpcscale.analysis.targets import target_lines
from hpcscale.model.vocab import cell_keys

CLASSIFIER_METRICS: tuple[str, ...] = ("train_loss", "val_loss", "train_accuracy", "val_accuracy")
CURVE_COLUMNS: tuple[str, ...] = (
    "group",
    "cell",
    "metric",
    "epoch",
    "value",
    "runs",
    "repeats",
)


def per_epoch(value: Any) -> np.ndarray:
    """A per-epoch list as floats (None and NaN kept as NaN); empty when nothing was recorded."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return np.array([], dtype=float)
    return np.array([np.nan if v is None else v for v in value], dtype=float)


def run_series(run: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every per-epoch metric one run recorded, by name (empty lists left out)."""
    out: dict[str, np.ndarray] = {}
    for name in CLASSIFIER_METRICS:
        series = per_epoch(run.get(name))
        if series.size:
            out[name] = series
    losses = run.get("losses")
    if isinstance(losses, Mapping):
        for name, values in sorted(losses.items()):
            series = per_epoch(values)
            if not series.size:
                continue
            same = "train_loss" in out and np.array_equal(series, out["train_loss"], equal_nan=True)
            if name == "loss" and same:
                continue  # the classifier's Keras "loss" is its training loss
            out[name] = series
    return out


def fold_epochs(series: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Median per epoch over runs, and how many runs had a finite value at each epoch; epochs
    no run has stay NaN (a gap, never filled from the neighbours)."""
    if len(series) == 1:  # one run (no repeats): its own values, without a median per epoch
        own = np.asarray(series[0], dtype=float)
        finite = np.isfinite(own)
        return np.where(finite, own, np.nan), finite.astype(np.int64)
    length = max((s.size for s in series), default=0)
    stack = np.full((len(series), length), np.nan)
    for i, s in enumerate(series):
        stack[i, : s.size] = s
    finite = np.isfinite(stack)
    counts = finite.sum(axis=0)
    medians = np.full(length, np.nan)
    for e in np.flatnonzero(counts):
        medians[e] = float(np.median(stack[finite[:, e], e]))
    return medians, counts


def learning_curves(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(cells, curves, skipped). `cells`: one row per cell that recorded a curve, with its
    cell keys (`vocab.cell_keys`), `group` (line group), `cell` (id), `repeats` and `run_ids`.
    `curves`: long form, one row per cell, metric and 1-based epoch, with the median `value` and
    `runs` (repeats with a finite value there; 0 at a gap). `skipped`: the runs with no
    per-epoch series at all (e.g. a GAN whose `losses` came back all None), so the report can
    name them, never drop them silently."""
    runs = normalise(df)
    runs = runs.assign(group=target_lines(runs).to_numpy())
    keys = list(cell_keys(runs.columns))
    runs["cell"] = runs.groupby(["group", *keys], dropna=False, sort=True).ngroup()
    # one pass over the runs' series and one groupby (a frame and a Series per run and cell
    # made this the report's slowest section at 1,000 runs)
    series = [c for c in (*CLASSIFIER_METRICS, "losses") if c in runs.columns]
    recorded_all = [run_series(r) for r in runs[series].to_dict("records")]
    run_ids = runs["run_id"].astype(str).tolist()
    by_cell = runs.groupby("cell", sort=True)
    firsts = by_cell.head(1)
    first_of = firsts[[*keys, "group"]].set_axis(firsts["cell"].to_numpy()).to_dict("index")
    cell_rows, rows, skipped = [], [], []
    for cid, at in sorted(by_cell.indices.items()):
        recorded = [recorded_all[i] for i in at]
        ids = [run_ids[i] for i in at]
        skipped += [r for r, rec in zip(ids, recorded, strict=True) if not rec]
        names = sorted({n for rec in recorded for n in rec})
        if not names:
            continue
        first = first_of[cid]
        group = int(first["group"])
        cell_rows.append(
            {
                **{k: first[k] for k in keys},
                "group": group,
                "cell": int(cid),
                "repeats": len(at),
                "run_ids": ",".join(ids),
            }
        )
        for name in names:
            medians, counts = fold_epochs([rec.get(name, np.array([])) for rec in recorded])
            for e, (value, n) in enumerate(zip(medians, counts, strict=True), start=1):
                rows.append((group, int(cid), name, e, value, int(n), len(at)))
    cells = pd.DataFrame(cell_rows)
    if cells.empty:
        cells = pd.DataFrame(columns=[*keys, "group", "cell", "repeats", "run_ids"])
    return cells, pd.DataFrame(rows, columns=list(CURVE_COLUMNS)), skipped


def gaps(curves: pd.DataFrame) -> pd.DataFrame:
    """The (cell, metric) lines with an epoch no repeat recorded, and those epochs (1-based),
    up to each line's last recorded epoch of the longest run."""
    found = curves[~np.isfinite(curves["value"].to_numpy(float))]
    if found.empty:
        return pd.DataFrame(columns=["cell", "metric", "epochs"])
    out = found.groupby(["cell", "metric"], sort=True)["epoch"].apply(list).reset_index()
    return out.rename(columns={"epoch": "epochs"})


def has_accuracy(curves: pd.DataFrame) -> bool:
    return bool(curves["metric"].isin(["train_accuracy", "val_accuracy"]).any())
