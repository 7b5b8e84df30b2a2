"""Time to a training target, from per-epoch lists: the epoch and wall time at which a run first
reaches a target loss (seed 000 compares batch sizes this way) or a stable validation-accuracy
plateau (seed 004 read its plateaus off plots by eye; here the rule is explicit).

Plateau rule: with best = max(accuracy), the plateau epoch is the first epoch e such that the
`window` epochs e, e+1, ... all lie within `tol` (absolute) of best. Epochs are 1-based; wall time
is the sum of the per-epoch times up to and including that epoch (epoch_time_s * e when the
run recorded no per-epoch list).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from hpcscale.analysis.frame import FrameError, normalise

Goal = Literal["min", "max"]


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


def plateau_index(accuracy: Sequence[float], window: int = 3, tol: float = 0.01) -> int | None:
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
    window: int = 3,
    tol: float = 0.01,
    mean_epoch_s: float = np.nan,
) -> Reached | None:
    i = plateau_index(accuracy, window, tol)
    return None if i is None else Reached(i + 1, wall_time_to(i, epoch_times_s, mean_epoch_s))


def targets(
    df: pd.DataFrame,
    target_loss: float | None = None,
    loss_key: str | None = None,
    window: int = 3,
    tol: float = 0.01,
) -> pd.DataFrame:
    """Per run: run_id, model, scaling, device, nodes, ranks, gpus, batch_per_rank,
    global_batch, repeat, epochs_to_target, time_to_target_s (when target_loss is given),
    plateau_epoch, time_to_plateau_s. Not reached: NaN."""
    runs = normalise(df)
    keep = [
        "run_id",
        "campaign",
        "model",
        "scaling",
        "device",
        "strategy",
        "nodes",
        "ranks",
        "gpus",
        "batch_per_rank",
        "global_batch",
        "repeat",
    ]
    out = runs[keep].copy()
    cols: dict[str, list[float]] = {
        "epochs_to_target": [],
        "time_to_target_s": [],
        "plateau_epoch": [],
        "time_to_plateau_s": [],
    }
    missing: list[FrameError] = []
    for _, run in runs.iterrows():
        times = _list(run["epoch_times_s"])
        mean = float(run["epoch_time_s"])
        hit = None
        if target_loss is not None:
            try:
                series = loss_series(run["losses"], loss_key)
            except FrameError as err:  # another model in the same table: judged below
                missing.append(err)
                series = np.array([], dtype=float)
            hit = time_to_target(times, series, target_loss, "min", mean)
        acc = _list(run["val_accuracy"])
        flat = time_to_plateau(times, acc, window, tol, mean) if acc is not None else None
        cols["epochs_to_target"].append(hit.epoch if hit else np.nan)
        cols["time_to_target_s"].append(hit.wall_s if hit else np.nan)
        cols["plateau_epoch"].append(flat.epoch if flat else np.nan)
        cols["time_to_plateau_s"].append(flat.wall_s if flat else np.nan)
    if missing and len(missing) == runs["losses"].map(lambda v: _list(v) is not None).sum():
        raise missing[0]  # no run has that loss: a typo, not a mixed table
    for name, values in cols.items():
        out[name] = np.asarray(values, dtype=float)
    if target_loss is not None:
        out["target_loss"] = target_loss
    return out


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
