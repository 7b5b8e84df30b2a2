"""Time to a training target, from per-epoch lists: the epoch and wall time at which a run first
reaches a target loss (seed 000 compares batch sizes this way) or a stable validation-accuracy
plateau (seed 004 read its plateaus off plots by eye; here the rule is explicit).

Plateau rule: with best = max(accuracy), the plateau epoch is the first epoch e such that the
`window` epochs e, e+1, ... all lie within `tol` (absolute) of best. Epochs are 1-based; wall time
is the sum of the per-epoch times up to and including that epoch (epoch_time_s * e when the
run recorded no per-epoch list).

Targets are `metric<=value` (a loss: lower is better) or `metric>=value` (an accuracy), set by
a campaign's `targets:` list or `hpcscale report --target` (`parse_target`). Without one,
`campaign_targets` uses the default of the workload kind (`model_family`): classifiers ('cnn')
are judged on the validation-accuracy plateau; GANs have no default, because no single loss of
theirs falls as the model improves (the discriminator's may fall while the generator fails).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis.baseline import aggregate_repeats, shared_keys
from hpcscale.analysis.frame import FrameError, normalise
from hpcscale.analysis.memo import COPY_ON_WRITE
from hpcscale.model.targets import Goal, TargetSpec
from hpcscale.model.vocab import cell_keys

ACCURACY_COLUMNS: tuple[str, ...] = ("val_accuracy", "train_accuracy")
# Workload kind (model_family) -> its default target: 'plateau' of val_accuracy, or None.
DEFAULT_TARGETS: dict[str, str | None] = {"cnn": "val_accuracy plateau", "gan": None}
PLATEAU_WINDOW = 3
PLATEAU_TOL = 0.01
TARGET_COLUMNS: tuple[str, ...] = (
    "epochs_to_target",
    "time_to_target_s",
    "plateau_epoch",
    "time_to_plateau_s",
)


@dataclass(frozen=True)
class Reached:
    epoch: int
    wall_s: float


def loss_series(losses: Any, key: str | None = None) -> np.ndarray:
    """Per-epoch values of one loss from any accepted `losses` form (see the package doc).

    `key` picks the loss; it may be omitted when there is only one, or one named 'loss'."""
    if losses is None or (isinstance(losses, float) and np.isnan(losses)):
        return np.array([], dtype=float)
    if isinstance(losses, Mapping):
        # Parquet stores mixed tables as one struct: names a run did not record come back None.
        recorded = {k: v for k, v in losses.items() if v is not None}
        return np.asarray(recorded[_pick(list(recorded), key)], dtype=float)
    items = list(losses)
    if items and isinstance(items[0], Mapping):
        name = _pick([k for k, v in items[0].items() if v is not None], key)
        return np.asarray([epoch.get(name, np.nan) for epoch in items], dtype=float)
    if key not in (None, "loss"):
        raise FrameError(f"losses are plain numbers; there is no loss named {key!r}")
    return np.asarray(items, dtype=float)


def first_reaching(values: Sequence[float], target: float, goal: Goal = "min") -> int | None:
    """0-based index of the first value at or below (goal 'min') / above ('max') target."""
    v = np.asarray(values, dtype=float)
    hit = v <= target if goal == "min" else v >= target
    idx = np.flatnonzero(hit)
    return int(idx[0]) if idx.size else None


def plateau_index(
    accuracy: Sequence[float], window: int = PLATEAU_WINDOW, tol: float = PLATEAU_TOL
) -> int | None:
    """0-based index of the first epoch that opens `window` epochs all within tol of the best."""
    if window < 1:
        raise ValueError("window must be at least 1")
    acc = np.asarray(accuracy, dtype=float)
    if acc.size < window or not np.isfinite(acc).any():
        return None
    near = acc >= np.nanmax(acc) - tol
    runs = np.convolve(near.astype(int), np.ones(window, dtype=int), mode="valid")
    idx = np.flatnonzero(runs == window)
    return int(idx[0]) if idx.size else None


def wall_time_to(epoch_index: int, epoch_times_s: Sequence[float] | None, mean_s: float) -> float:
    """Seconds from the start of training to the end of epoch `epoch_index` (0-based)."""
    if epoch_times_s is not None and len(epoch_times_s) > epoch_index:
        return float(np.sum(np.asarray(epoch_times_s, dtype=float)[: epoch_index + 1]))
    return float(mean_s * (epoch_index + 1))


def time_to_target(
    epoch_times_s: Sequence[float] | None,
    values: Sequence[float],
    target: float,
    goal: Goal = "min",
    mean_epoch_s: float = np.nan,
) -> Reached | None:
    i = first_reaching(values, target, goal)
    return None if i is None else Reached(i + 1, wall_time_to(i, epoch_times_s, mean_epoch_s))


def time_to_plateau(
    epoch_times_s: Sequence[float] | None,
    accuracy: Sequence[float],
    window: int = PLATEAU_WINDOW,
    tol: float = PLATEAU_TOL,
    mean_epoch_s: float = np.nan,
) -> Reached | None:
    i = plateau_index(accuracy, window, tol)
    return None if i is None else Reached(i + 1, wall_time_to(i, epoch_times_s, mean_epoch_s))


def targets(
    df: pd.DataFrame,
    target_loss: float | None = None,
    loss_key: str | None = None,
    window: int = PLATEAU_WINDOW,
    tol: float = PLATEAU_TOL,
    goal: Goal = "min",
) -> pd.DataFrame:
    """Per run: run_id, the cell's keys (`vocab.cell_keys`, so `fold_targets` can fold
    repeats like every other metric), repeat, epochs_to_target, time_to_target_s (when
    target_loss is given), plateau_epoch, time_to_plateau_s. Not reached: NaN. `loss_key` may
    name an accuracy column (val_accuracy, train_accuracy) as well as a loss; `goal` 'max'
    means at or above the target."""
    return _targets(normalise(df), target_loss, loss_key, window, tol, goal)


def _targets(
    runs: pd.DataFrame,
    target_loss: float | None = None,
    loss_key: str | None = None,
    window: int = PLATEAU_WINDOW,
    tol: float = PLATEAU_TOL,
    goal: Goal = "min",
) -> pd.DataFrame:
    """`targets` of runs already `normalise`d (normalising them again costs as much as the
    first time: the memo knows a frame by identity, not by having made it)."""
    # copy-on-write (pandas 3): the selection is a frame of its own, no .copy() needed
    out = runs[["run_id", *cell_keys(runs.columns), "repeat"]]
    if not COPY_ON_WRITE:
        out = out.copy()
    cols: dict[str, list[float]] = {name: [] for name in TARGET_COLUMNS}
    missing: list[FrameError] = []
    for _, run in runs.iterrows():
        times = _list(run["epoch_times_s"])
        mean = float(run["epoch_time_s"])
        hit = None
        if target_loss is not None:
            try:
                series = _series(run, loss_key)
            except FrameError as err:  # another model in the same table: judged below
                missing.append(err)
                series = np.array([], dtype=float)
            hit = time_to_target(times, series, target_loss, goal, mean)
        acc = _list(run["val_accuracy"])
        flat = time_to_plateau(times, acc, window, tol, mean) if acc is not None else None
        cols["epochs_to_target"].append(hit.epoch if hit else np.nan)
        cols["time_to_target_s"].append(hit.wall_s if hit else np.nan)
        cols["plateau_epoch"].append(flat.epoch if flat else np.nan)
        cols["time_to_plateau_s"].append(flat.wall_s if flat else np.nan)
    recorded = runs["losses"].map(lambda v: _list(v) is not None).sum()
    if missing and loss_key not in ACCURACY_COLUMNS and len(missing) == recorded:
        raise missing[0]  # no run has that loss: a typo, not a mixed table
    for name, values in cols.items():
        out[name] = np.asarray(values, dtype=float)
    if target_loss is not None:
        out["target_loss"] = target_loss
    return out


def fold_targets(per_run: pd.DataFrame) -> pd.DataFrame:
    """One row per cell, times to target as the median over repeats (with `_min`, `_max`,
    `repeats`): the same folding as every other metric, so cells that differ in any run field
    or workload argument (strategy, knobs, layout, args.lr) stay apart."""
    return aggregate_repeats(per_run, TARGET_COLUMNS)


def target_lines(cells: pd.DataFrame) -> pd.Series:
    """A line number per folded cell for a plot against ranks: cells equal in everything but
    the scale (workload arguments included), holding the batch fixed that the scaling fixes
    (global for strong, per rank for weak and none), numbered in sorted key order."""
    fixed = cells["global_batch"].where(cells["scaling"] == "strong", cells["batch_per_rank"])
    shared = shared_keys(cells.columns)
    keyed = cells[shared].assign(fixed_batch=fixed)
    return keyed.groupby([*shared, "fixed_batch"], dropna=False, sort=True).ngroup()


def choose_loss(losses: pd.Series) -> str | None:
    """'loss' when recorded, else the first name in alphabetical order (GANs: d_loss)."""
    names: set[str] = set()
    for value in losses:
        if isinstance(value, Mapping):
            names |= {k for k, v in value.items() if v is not None and len(v)}
        elif isinstance(value, list | tuple | np.ndarray) and len(value):
            first = value[0]
            names |= set(first) if isinstance(first, Mapping) else {"loss"}
    if not names:
        return None
    return "loss" if "loss" in names else sorted(names)[0]


def common_target(losses: pd.Series, key: str) -> float | None:
    """The worst run's best value: the lowest loss every run reaches."""
    bests = []
    for value in losses:
        try:
            series = loss_series(value, key)
        except (FrameError, KeyError):
            continue
        if series.size and np.isfinite(series).any():
            bests.append(float(np.nanmin(series)))
    return max(bests) if bests else None


@dataclass(frozen=True)
class CampaignTargets:
    """Times to target for a whole campaign: the targets followed (`specs`, empty when the
    default plateau is used), per run and per cell with a `target` column naming each, and
    `unset`: workload kinds with no default and no target given (the report says how to set
    one)."""

    specs: tuple[TargetSpec, ...]
    per_run: pd.DataFrame
    cells: pd.DataFrame
    unset: tuple[str, ...] = ()
    default: str | None = None  # the default used (e.g. 'val_accuracy plateau'), if any

    @property
    def measured(self) -> bool:
        """Whether any run reached a target or a plateau (else there is nothing to show)."""
        found = [c for c in ("time_to_target_s", "time_to_plateau_s") if c in self.per_run]
        return bool(found) and bool(self.per_run[found].notna().any().any())


def campaign_targets(df: pd.DataFrame, specs: Sequence[TargetSpec] = ()) -> CampaignTargets:
    """Time to each target in `specs`, per run and per cell; without specs, the default of each
    workload kind (DEFAULT_TARGETS): the val_accuracy plateau for classifiers, none for GANs."""
    runs = normalise(df)
    if specs:
        per, cells = [], []
        for spec in specs:
            one = _targets(runs, target_loss=spec.value, loss_key=spec.metric, goal=spec.goal)
            one = one.assign(plateau_epoch=np.nan, time_to_plateau_s=np.nan)
            per.append(one.assign(target=spec.text, target_source=spec.source))
            cells.append(fold_targets(one).assign(target=spec.text, target_source=spec.source))
        return CampaignTargets(tuple(specs), pd.concat(per), pd.concat(cells, ignore_index=True))
    raw = runs["model_family"] if "model_family" in runs else pd.Series([None] * len(runs))
    family = raw.astype(object).where(raw.notna(), "").reset_index(drop=True)
    kinds = sorted({str(f) for f in family})
    unset = tuple(k or "unknown" for k in kinds if DEFAULT_TARGETS.get(k) is None)
    classifiers = runs[family.to_numpy() == "cnn"]
    # no target: epochs/time to target stay NaN; the index reset as normalise would
    per_run = _targets(classifiers.reset_index(drop=True))
    source = "default for classifiers (model_family cnn)"
    per_run = per_run.assign(target="val_accuracy plateau", target_source=source)
    cells = fold_targets(per_run).assign(target="val_accuracy plateau", target_source=source)
    default = "val_accuracy plateau" if len(classifiers) else None
    return CampaignTargets((), per_run, cells, unset, default)


def _series(run: pd.Series, metric: str | None) -> np.ndarray:
    """Per-epoch values of `metric`: an accuracy column, else a loss of `losses`."""
    if metric in ACCURACY_COLUMNS:
        values = _list(run.get(metric))
        if values is None:
            raise FrameError(f"no {metric} recorded")
        return np.asarray(values, dtype=float)
    return loss_series(run["losses"], metric)


def _pick(names: list[str], key: str | None) -> str:
    if key is not None:
        if key not in names:
            raise FrameError(f"no loss named {key!r}; the runs recorded {', '.join(names)}")
        return key
    if len(names) == 1:
        return names[0]
    if "loss" in names:
        return "loss"
    raise FrameError(f"several losses recorded ({', '.join(names)}); say which one to use")


def _list(value: Any) -> list[float] | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return list(value)
