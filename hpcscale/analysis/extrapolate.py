"""Predictions for node counts nobody measured (16, 32, ...), per group, always labelled.

Strong groups: Amdahl fit on every run's epoch time (repeats add degrees of freedom).
Weak groups: Gustafson fit on throughput. Communication: the ring vs parameter-server byte
model at each size, timed with the bus bandwidth the collector measured (the largest measured
size's bandwidth is assumed to hold further out; its min/max over repeats gives the band).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis.baseline import SHARED, iter_groups
from hpcscale.analysis.frame import check_axis, default_axis, normalise
from hpcscale.analysis.models import (
    fit_amdahl,
    fit_gustafson,
    parameter_server_bytes,
    ring_allreduce_bytes,
    transfer_time_s,
)
from hpcscale.analysis.scaling import with_throughput
from hpcscale.core.vocab import term

DEFAULT_AT: tuple[int, ...] = (16, 32)


def predict_at(cells: pd.DataFrame) -> list[float]:
    """Sizes worth predicting for derived cells: DEFAULT_AT (what users ask for) plus 2x and 4x
    the largest size measured, keeping only those beyond it."""
    top = float(cells["axis_value"].max())
    return sorted({float(v) for v in (*DEFAULT_AT, 2 * top, 4 * top) if v > top})


def extrapolate(
    df: pd.DataFrame,
    axis: str | None = None,
    at: Sequence[float] = DEFAULT_AT,
    level: float = 0.95,
) -> pd.DataFrame:
    """One row per (group, size in `at`): law, metric, unit, predicted, lower, upper, level,
    serial_fraction (+ _se), base (T1 or X1), dof, points, kind='prediction', label.

    Groups with fewer than two distinct sizes, or scaling 'none', are skipped."""
    runs = with_throughput(normalise(df))
    axis = check_axis(axis or default_axis(runs))
    rows: list[dict[str, Any]] = []
    for gid, grp in iter_groups(runs, axis):
        scaling = grp["scaling"].iloc[0]
        if scaling == "strong":
            law, metric, fitter = "amdahl", "epoch_time_s", fit_amdahl
        elif scaling == "weak":
            law, metric, fitter = "gustafson", "images_per_s", fit_gustafson
        else:
            continue
        unit = term(metric).unit
        ok = grp[metric].notna()
        if grp.loc[ok, axis].nunique() < 2:
            continue
        fit = fitter(grp.loc[ok, axis], grp.loc[ok, metric])
        band = fit.predict(np.asarray(at, dtype=float), level)
        keys = _keys(grp)
        for i, size in enumerate(band.n):
            rows.append(
                {
                    **keys,
                    "group": gid,
                    "axis": axis,
                    "axis_value": size,
                    "law": law,
                    "metric": metric,
                    "unit": unit,
                    "predicted": band.value[i],
                    "lower": band.lower[i],
                    "upper": band.upper[i],
                    "level": level,
                    "serial_fraction": fit.serial_fraction,
                    "serial_fraction_se": fit.serial_fraction_se,
                    "base": fit.base,
                    "dof": fit.dof,
                    "points": fit.n_points,
                    "kind": "prediction",
                    "label": f"prediction ({law.capitalize()} fit, {level:.0%} interval)",
                }
            )
    return pd.DataFrame(rows)


def comm_cost(
    df: pd.DataFrame, axis: str | None = None, at: Sequence[float] = DEFAULT_AT
) -> pd.DataFrame:
    """Ring vs parameter-server bytes per step and their transfer time, per group, at every
    measured size (kind 'measured-bandwidth') and at each size in `at` (kind 'prediction').

    Participants are ranks (Horovod) or GPUs (MirroredStrategy); elements are 4 bytes, 2 with
    fp16 all-reduce compression. Groups without param_count are skipped; without bandwidth
    the bytes are still given and the times are NaN."""
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
                }
            )
    return pd.DataFrame(rows)


def _keys(grp: pd.DataFrame) -> dict[str, Any]:
    first = grp.iloc[0]
    return {k: first[k] for k in SHARED}
