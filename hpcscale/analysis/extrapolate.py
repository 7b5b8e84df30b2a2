"""Predictions for node counts nobody measured (16, 32, ...), per group, always labelled.

A fit predicts only when it is physical and over-determined (`models.fit_problem`); predictions
past what the system profile's `max_nodes` holds are marked `beyond_system`.
Strong groups: Amdahl fit on every run's epoch time (repeats add degrees of freedom).
Weak groups: Gustafson fit on throughput. Communication: the ring vs parameter-server byte
model at each size, timed with the bus bandwidth the collector measured (the largest measured
size's bandwidth is assumed to hold further out; its min/max over repeats gives the band).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis.baseline import SHARED, iter_groups
from hpcscale.analysis.frame import check_axis, default_axis, normalise
from hpcscale.analysis.models import (
    LawFit,
    fit_amdahl,
    fit_gustafson,
    fit_problem,
    parameter_server_bytes,
    ring_allreduce_bytes,
    transfer_time_s,
)
from hpcscale.analysis.scaling import with_throughput
from hpcscale.core.vocab import term

DEFAULT_AT: tuple[int, ...] = (16, 32)
# Scaling mode -> (law, the metric it is fitted to).
LAWS: dict[str, tuple[str, str]] = {
    "strong": ("amdahl", "epoch_time_s"),
    "weak": ("gustafson", "images_per_s"),
}
FITTERS = {"amdahl": fit_amdahl, "gustafson": fit_gustafson}


def predict_at(cells: pd.DataFrame) -> list[float]:
    """Sizes worth predicting for derived cells: DEFAULT_AT (what users ask for) plus 2x and 4x
    the largest size measured, keeping only those beyond it."""
    top = float(cells["axis_value"].max())
    return sorted({float(v) for v in (*DEFAULT_AT, 2 * top, 4 * top) if v > top})


def axis_limit(grp: pd.DataFrame, axis: str, max_nodes: float | None) -> float:
    """The largest size of `axis` the system holds for this group: max_nodes in nodes, times the
    group's ranks per node (ranks) or GPUs per node (gpus); inf when the system is unknown."""
    if max_nodes is None or not np.isfinite(max_nodes):
        return np.inf
    by_axis = {
        "nodes": 1.0,
        "ranks": grp["tasks_per_node"].max(),
        "gpus": grp["gpus_per_node"].max(),
    }
    per = float(by_axis[axis])
    return float(max_nodes) * per if np.isfinite(per) and per > 0 else np.inf


def _fits(runs: pd.DataFrame, axis: str) -> Iterator[tuple[int, pd.DataFrame, LawFit | str]]:
    """(group id, rows, fit or the reason there is none) per weak/strong group measured at two
    sizes or more."""
    for gid, grp in iter_groups(runs, axis):
        scaling = grp["scaling"].iloc[0]
        if scaling not in LAWS:
            continue
        law, metric = LAWS[scaling]
        ok = grp[metric].notna()
        if grp.loc[ok, axis].nunique() < 2:
            continue
        try:
            fit = FITTERS[law](grp.loc[ok, axis], grp.loc[ok, metric])
        except ValueError as exc:  # non-positive values: nothing a law can describe
            yield gid, grp, str(exc)
            continue
        yield gid, grp, fit_problem(fit) or fit


def refusals(df: pd.DataFrame, axis: str | None = None) -> pd.DataFrame:
    """One row per group whose fit predicts nothing: the group's settings, law, points, reason."""
    runs = with_throughput(normalise(df))
    axis = check_axis(axis or default_axis(runs))
    rows = []
    for gid, grp, fit in _fits(runs, axis):
        if isinstance(fit, str):
            law = LAWS[grp["scaling"].iloc[0]][0]
            rows.append({**_keys(grp), "group": gid, "law": law, "reason": fit})
    return pd.DataFrame(rows, columns=[*SHARED, "group", "law", "reason"])


def extrapolate(
    df: pd.DataFrame,
    axis: str | None = None,
    at: Sequence[float] = DEFAULT_AT,
    level: float = 0.95,
    max_nodes: float | None = None,
) -> pd.DataFrame:
    """One row per (group, size in `at`): law, metric, unit, predicted, lower, upper, level,
    interval (what the band is), serial_fraction (+ _se), base (T1 or X1), dof, points,
    beyond_system (the size exceeds what `max_nodes` holds), kind='prediction', label.

    Only fits that pass `models.fit_problem` predict (see `refusals` for the others), so every
    prediction is positive; a band's lower end below zero is clipped to 0 (`lower_clipped`)."""
    runs = with_throughput(normalise(df))
    axis = check_axis(axis or default_axis(runs))
    rows: list[dict[str, Any]] = []
    for gid, grp, fit in _fits(runs, axis):
        if isinstance(fit, str):
            continue
        metric = LAWS[grp["scaling"].iloc[0]][1]
        band = fit.predict(np.asarray(at, dtype=float), level)
        # fit_problem passed: a + b·f(N) with a, b >= 0, a + b > 0 is positive at every N > 0.
        # Checked for real (not an assert, which `python -O` drops): never print a value <= 0.
        if not (np.isfinite(band.value) & (band.value > 0)).all():
            raise RuntimeError(
                f"internal error: a physical {fit.law} fit (base {fit.base:.4g}, serial fraction "
                f"{fit.serial_fraction:.4g}) predicted {band.value.tolist()} at {list(at)}"
            )
        limit = axis_limit(grp, axis, max_nodes)
        name = interval_name(level, fit.dof)
        for i, size in enumerate(band.n):
            lower = band.lower[i]
            rows.append(
                {
                    **_keys(grp),
                    "group": gid,
                    "axis": axis,
                    "axis_value": size,
                    "law": fit.law,
                    "metric": metric,
                    "unit": term(metric).unit,
                    "predicted": band.value[i],
                    "lower": max(lower, 0.0) if np.isfinite(lower) else lower,
                    "upper": band.upper[i],
                    "lower_clipped": bool(np.isfinite(lower) and lower < 0),
                    "level": level,
                    "interval": name,
                    "serial_fraction": fit.serial_fraction,
                    "serial_fraction_se": fit.serial_fraction_se,
                    "base": fit.base,
                    "dof": fit.dof,
                    "points": fit.n_points,
                    "beyond_system": bool(size > limit),
                    "system_limit": limit,
                    "kind": "prediction",
                    "label": f"prediction ({fit.law.capitalize()} fit)"
                    + (", beyond the system's max_nodes" if size > limit else ""),
                }
            )
    return pd.DataFrame(rows)


def interval_name(level: float, dof: int) -> str:
    """What the band is, truthfully: a Student-t prediction interval from the fit's residuals."""
    if dof < 1:
        return "none (exact fit)"
    return f"{level:.0%} prediction interval (Student t on the fit's residuals, {dof} dof)"


def comm_cost(
    df: pd.DataFrame,
    axis: str | None = None,
    at: Sequence[float] = DEFAULT_AT,
    max_nodes: float | None = None,
) -> pd.DataFrame:
    """Ring vs parameter-server bytes per step and their transfer time, per group, at every
    measured size (kind 'measured-bandwidth') and at each size in `at` (kind 'prediction').

    Participants are ranks (Horovod) or GPUs (MirroredStrategy); elements are 4 bytes, 2 with
    fp16 all-reduce compression. Groups without param_count are skipped; without bandwidth
    the bytes are still given and the times are NaN. `beyond_system`: the size exceeds what the
    system's `max_nodes` holds (`axis_limit`)."""
    runs = normalise(df)
    axis = check_axis(axis or default_axis(runs))
    rows: list[dict[str, Any]] = []
    for gid, grp in iter_groups(runs, axis):
        params = grp["param_count"].median()
        if not np.isfinite(params):
            continue
        mirrored = grp["strategy"].iloc[0] == "mirrored"
        participants = grp["gpus"] if mirrored else grp["ranks"]
        per_unit = float((participants / grp[axis]).median())
        bpp = 2.0 if bool(grp["fp16_allreduce"].iloc[0]) else 4.0
        measured = grp.groupby(axis)["bus_bandwidth_gbs"].agg(["median", "min", "max"])
        measured_bytes = grp.groupby(axis)["allreduce_bytes_per_step"].median()
        measured.index = measured.index.astype(float)
        measured_bytes.index = measured_bytes.index.astype(float)
        with_bw = measured.dropna()
        last = with_bw.iloc[-1] if len(with_bw) else pd.Series({"median": np.nan})
        sizes = [(float(v), "measured-bandwidth") for v in measured.index]
        sizes += [(float(v), "prediction") for v in at if float(v) not in measured.index]
        keys = _keys(grp)
        limit = axis_limit(grp, axis, max_nodes)
        for size, kind in sizes:
            bw = measured.loc[size] if kind != "prediction" else last
            bw = bw if np.isfinite(bw["median"]) else last
            p = size * per_unit
            ring = float(ring_allreduce_bytes(params, p, bpp))
            ps = float(parameter_server_bytes(params, p, bpp))
            rows.append(
                {
                    **keys,
                    "group": gid,
                    "axis": axis,
                    "axis_value": size,
                    "participants": p,
                    "param_count": params,
                    "bytes_per_param": bpp,
                    "ring_bytes": ring,
                    "ps_bytes": ps,
                    "measured_allreduce_bytes_per_step": measured_bytes.get(size, np.nan),
                    "bandwidth_gbs": bw.get("median", np.nan),
                    "bandwidth_min_gbs": bw.get("min", np.nan),
                    "bandwidth_max_gbs": bw.get("max", np.nan),
                    "ring_time_s": float(transfer_time_s(ring, bw.get("median", np.nan))),
                    "ring_time_lower_s": float(transfer_time_s(ring, bw.get("max", np.nan))),
                    "ring_time_upper_s": float(transfer_time_s(ring, bw.get("min", np.nan))),
                    "ps_time_s": float(transfer_time_s(ps, bw.get("median", np.nan))),
                    "ps_time_lower_s": float(transfer_time_s(ps, bw.get("max", np.nan))),
                    "ps_time_upper_s": float(transfer_time_s(ps, bw.get("min", np.nan))),
                    "kind": kind,
                    "beyond_system": bool(size > limit),
                }
            )
    return pd.DataFrame(rows)


def _keys(grp: pd.DataFrame) -> dict[str, Any]:
    first = grp.iloc[0]
    return {k: first[k] for k in SHARED}
