"""Predictions for node counts nobody measured (16, 32, ...), per group, always labelled.

A fit predicts only when it is physical and over-determined (`models.fit_problem`); predictions
past what the system profile's `max_nodes` holds are marked `beyond_system`.
Strong groups: Amdahl fit on every run's time (repeats add degrees of freedom).
Weak groups: Gustafson fit on throughput. Both are the campaign's scaling metric's columns
(`ScalingMetric.time_column`, `throughput_column`: the epoch time and images/s by default).
Communication: the ring vs parameter-server byte model at each size, timed with the bus
bandwidth the collector measured (the largest measured size's bandwidth is assumed to hold
further out; its min/max over repeats gives the band).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis.baseline import SHARED, group_ids
from hpcscale.analysis.frame import check_axis, default_axis, normalise
from hpcscale.analysis.memo import FrameMemo
from hpcscale.analysis.metric import chosen_metric
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
from hpcscale.model.scaling_metric import ScalingMetric, metric_of
from hpcscale.model.vocab import arg_columns, is_arg_column, term

DEFAULT_AT: tuple[int, ...] = (16, 32)
# Scaling mode -> (law, the kind of column it is fitted to).
LAWS: dict[str, tuple[str, str]] = {
    "strong": ("amdahl", "time"),
    "weak": ("gustafson", "throughput"),
}


def law_column(scaling: str, metric: ScalingMetric | str | None = None) -> str:
    """The column a scaling mode's law is fitted to: `metric`'s time or throughput."""
    m = metric_of(metric)
    return m.time_column if LAWS[scaling][1] == "time" else m.throughput_column


def _unit(column: str, metric: ScalingMetric) -> str:
    """A fitted column's unit: the campaign's metric's own, else the vocabulary's."""
    return (metric.unit or "s") if column == metric.name and not metric.usual else term(column).unit


FITTERS = {"amdahl": fit_amdahl, "gustafson": fit_gustafson}
# a table's group id per row, and each group's (id, first run's fields, fit or why none)
Fitted = tuple[pd.Series, list[tuple[int, dict[str, Any], LawFit | str]]]


def predict_at(cells: pd.DataFrame) -> list[float]:
    """Sizes worth predicting for derived cells: DEFAULT_AT (what users ask for) plus 2x and 4x
    the largest size measured, keeping only those beyond it."""
    top = float(cells["axis_value"].max())
    return sorted({float(v) for v in (*DEFAULT_AT, 2 * top, 4 * top) if v > top})


def _fits(
    runs: pd.DataFrame,
    axis: str,
    max_nodes: float | None = None,
    metric: ScalingMetric | str | None = None,
) -> Iterator[tuple[int, dict[str, Any], float, LawFit | str]]:
    """(group id, its first run's fields, its axis limit (`_limits`), fit or why none)
    per weak/strong group measured at two sizes or more. One groupby and NumPy per group (a
    frame per group made a sweep's report crawl); the fits are made once per table and axis
    (`refusals` and `extrapolate` ask for the same ones: analysis.memo)."""
    if runs.empty:
        return
    m = metric_of(metric)
    key = (axis, m.time_column, m.throughput_column)
    gid, fitted = _FITTED.get(runs, key, lambda: _fitted(runs, axis, m))
    limits = _limits(runs.groupby(gid, sort=True), axis, max_nodes)
    for g, first, fit in fitted:
        yield g, first, limits[g], fit


def _fitted(runs: pd.DataFrame, axis: str, metric: ScalingMetric) -> Fitted:
    """The group ids of the rows (`baseline.group_ids`: `_fits` groups the limits by them too),
    and (group id, its first run's fields, fit or why none) of every group `_fits` yields."""
    gid = group_ids(runs, axis)
    first = _first_rows(runs, gid)
    sizes = runs[axis].to_numpy(float)
    columns = {s: law_column(s, metric) for s in LAWS}
    values = {c: runs[c].to_numpy(float) for c in columns.values() if c in runs.columns}
    out: list[tuple[int, dict[str, Any], LawFit | str]] = []
    for g, at in sorted(runs.groupby(gid, sort=True).indices.items()):
        scaling = first[g]["scaling"]
        if scaling not in LAWS:
            continue
        law, column = LAWS[scaling][0], columns[scaling]
        y = values[column][at]
        n = sizes[at][~np.isnan(y)]
        if np.unique(n[~np.isnan(n)]).size < 2:
            continue
        try:
            fit = FITTERS[law](n, y[~np.isnan(y)])
        except ValueError as exc:  # non-positive values: nothing a law can describe
            out.append((int(g), first[g], str(exc)))
            continue
        out.append((int(g), first[g], fit_problem(fit) or fit))
    return gid, out


# the fits by (table, axis), compared by value: each caller normalises its own copy
_FITTED: FrameMemo[Fitted] = FrameMemo(lambda got: (got[0].copy(), list(got[1])), by_value=True)


def _first_rows(runs: pd.DataFrame, gid: pd.Series) -> dict[int, dict[str, Any]]:
    """Each group's first run (in table order) as a dict of the fields read here, by group id."""
    firsts = runs.groupby(gid, sort=True).head(1)
    # a group's workload arguments too: the predictions table names them like the results table
    cols = [c for c in dict.fromkeys([*SHARED, *FIRST_FIELDS, *arg_columns(runs.columns)])]
    cols = [c for c in cols if c in runs.columns]
    return firsts[cols].set_axis(gid.loc[firsts.index].to_numpy()).to_dict("index")


FIRST_FIELDS = ("scaling", "strategy", "fp16_allreduce")  # a group's, read off its first run


def refusals(
    df: pd.DataFrame, axis: str | None = None, metric: ScalingMetric | str | None = None
) -> pd.DataFrame:
    """One row per group whose fit predicts nothing: the group's settings, law, points, reason."""
    runs = with_throughput(normalise(df))
    axis = check_axis(axis or default_axis(runs))
    rows = []
    own = chosen_metric(metric, runs)
    for gid, first, _, fit in _fits(runs, axis, metric=own):
        if isinstance(fit, str):
            law = LAWS[first["scaling"]][0]
            rows.append({**_keys(first), "group": gid, "law": law, "reason": fit})
    columns = [*SHARED, *arg_columns(runs.columns), "group", "law", "reason"]
    return pd.DataFrame(rows, columns=columns)


def extrapolate(
    df: pd.DataFrame,
    axis: str | None = None,
    at: Sequence[float] = DEFAULT_AT,
    level: float = 0.95,
    max_nodes: float | None = None,
    metric: ScalingMetric | str | None = None,
) -> pd.DataFrame:
    """One row per (group, size in `at`): law, metric (the column fitted: `metric`'s), unit,
    predicted, lower, upper, level, interval (what the band is), serial_fraction (+ _se), base
    (T1 or X1), dof, points,
    beyond_system (the size exceeds what `max_nodes` holds), kind='prediction', label.

    Only fits that pass `models.fit_problem` predict (see `refusals` for the others), so every
    prediction is positive; a band's lower end below zero is clipped to 0 (`lower_clipped`)."""
    runs = with_throughput(normalise(df))
    axis = check_axis(axis or default_axis(runs))
    rows: list[dict[str, Any]] = []
    own = chosen_metric(metric, runs)
    for gid, first, limit, fit in _fits(runs, axis, max_nodes, own):
        if isinstance(fit, str):
            continue
        column = law_column(first["scaling"], own)
        band = fit.predict(np.asarray(at, dtype=float), level)
        # fit_problem passed: a + b·f(N) with a, b >= 0, a + b > 0 is positive at every N > 0.
        # Checked for real (not an assert, which `python -O` drops): never print a value <= 0.
        if not (np.isfinite(band.value) & (band.value > 0)).all():
            raise RuntimeError(
                f"internal error: a physical {fit.law} fit (base {fit.base:.4g}, serial fraction "
                f"{fit.serial_fraction:.4g}) predicted {band.value.tolist()} at {list(at)}"
            )
        name = interval_name(level, fit.dof)
        keys = _keys(first)
        for i, size in enumerate(band.n):
            lower = band.lower[i]
            rows.append(
                {
                    **keys,
                    "group": gid,
                    "axis": axis,
                    "axis_value": size,
                    "law": fit.law,
                    "metric": column,
                    "unit": _unit(column, own),
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

    Participants are ranks (one process per replica) or GPUs (in-process replicas); elements
    are 4 bytes, 2 with fp16 all-reduce compression. Groups without param_count are skipped;
    without bandwidth the bytes are still given and the times are NaN. `beyond_system`: the
    size exceeds what the system's `max_nodes` holds (`_limits`). The per-group figures come
    from one groupby each, the rows from plain dicts: linear in runs."""
    runs = normalise(df)
    axis = check_axis(axis or default_axis(runs))
    if runs.empty:
        return pd.DataFrame()
    gid = group_ids(runs, axis).rename("_group")
    first = _first_rows(runs, gid)
    mirrored = gid.map({g: r["strategy"] == "mirrored" for g, r in first.items()}).to_numpy(bool)
    with np.errstate(divide="ignore", invalid="ignore"):  # a size of 0: inf, as pandas gave
        unit = np.where(mirrored, runs["gpus"], runs["ranks"]) / runs[axis].to_numpy(float)
    per_group = runs.groupby(gid, sort=True)
    params = per_group["param_count"].median().to_dict()
    per_unit = pd.Series(unit, index=runs.index).groupby(gid).median().to_dict()
    limits = _limits(per_group, axis, max_nodes)
    by_size = runs.groupby([gid, runs[axis].astype(float).rename("_size")], sort=True)
    bw = by_size["bus_bandwidth_gbs"].agg(["median", "min", "max"])
    sent = by_size["allreduce_bytes_per_step"].median().to_dict()
    measured: dict[int, dict[float, dict[str, float]]] = {}
    for (g, size), row in zip(bw.index, bw.to_dict("records"), strict=True):
        measured.setdefault(int(g), {})[float(size)] = row
    rows: list[dict[str, Any]] = []
    # each row's (params, participants, bytes per param): the byte models run once, on arrays
    # (a NumPy call per row was most of this function on a 1,000-run sweep)
    operands: list[tuple[float, float, float]] = []
    for g in sorted(first):
        params_g = params[g]
        if not np.isfinite(params_g):
            continue
        sizes_bw = measured.get(g, {})
        with_bw = [v for v in sizes_bw.values() if not any(np.isnan(x) for x in v.values())]
        last = with_bw[-1] if with_bw else {"median": np.nan}
        bpp = 2.0 if bool(first[g]["fp16_allreduce"]) else 4.0
        sizes = [(v, "measured-bandwidth") for v in sizes_bw]
        sizes += [(float(v), "prediction") for v in at if float(v) not in sizes_bw]
        keys = _keys(first[g])
        for size, kind in sizes:
            got = sizes_bw[size] if kind != "prediction" else last
            got = got if np.isfinite(got["median"]) else last
            p = size * per_unit[g]
            operands.append((params_g, p, bpp))
            med, lo, hi = (got.get(k, np.nan) for k in ("median", "min", "max"))
            rows.append(
                {
                    **keys,
                    "group": g,
                    "axis": axis,
                    "axis_value": size,
                    "participants": p,
                    "param_count": params_g,
                    "bytes_per_param": bpp,
                    "ring_bytes": np.nan,  # below, a column at a time
                    "ps_bytes": np.nan,
                    "measured_allreduce_bytes_per_step": sent.get((g, size), np.nan),
                    "bandwidth_gbs": med,
                    "bandwidth_min_gbs": lo,
                    "bandwidth_max_gbs": hi,
                    **dict.fromkeys(TIMES, np.nan),  # below, a column at a time
                    "kind": kind,
                    "beyond_system": bool(size > limits[g]),
                }
            )
    out = pd.DataFrame(rows)
    if len(out):
        m, p, bpp = np.array(operands, dtype=float).T
        out["ring_bytes"] = ring_allreduce_bytes(m, p, bpp)
        out["ps_bytes"] = parameter_server_bytes(m, p, bpp)
    for col, (nbytes, bandwidth) in TIMES.items():
        if len(out):
            out[col] = transfer_time_s(out[nbytes], out[bandwidth]).astype(float)
    return out


# Time column -> (bytes, bandwidth) it divides: lower times at the highest bandwidth.
TIMES: dict[str, tuple[str, str]] = {
    "ring_time_s": ("ring_bytes", "bandwidth_gbs"),
    "ring_time_lower_s": ("ring_bytes", "bandwidth_max_gbs"),
    "ring_time_upper_s": ("ring_bytes", "bandwidth_min_gbs"),
    "ps_time_s": ("ps_bytes", "bandwidth_gbs"),
    "ps_time_lower_s": ("ps_bytes", "bandwidth_max_gbs"),
    "ps_time_upper_s": ("ps_bytes", "bandwidth_min_gbs"),
}


def _limits(per_group: Any, axis: str, max_nodes: float | None) -> dict[int, float]:
    """The largest size of the axis the system holds, for every group at once: `max_nodes` in
    nodes, times the group's ranks or GPUs per node; inf when the system is unknown."""
    if max_nodes is None or not np.isfinite(max_nodes):
        return defaultdict(lambda: np.inf)
    if axis == "nodes":
        return defaultdict(lambda: float(max_nodes))
    per = per_group["tasks_per_node" if axis == "ranks" else "gpus_per_node"].max().astype(float)
    limit = np.where(np.isfinite(per) & (per > 0), float(max_nodes) * per, np.inf)
    return dict(zip(per.index.astype(int), limit.tolist(), strict=True))


def _keys(first: dict[str, Any]) -> dict[str, Any]:
    """A group's shared settings (its `args.<name>` columns included), from its first run."""
    return {k: first[k] for k in _key_names(tuple(first))}


@functools.lru_cache(maxsize=64)
def _key_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """Which of a first run's fields `_keys` keeps, in their order: every group of a table has
    the same fields, so this is decided once per table, not once per group."""
    return tuple(k for k in names if k in SHARED or is_arg_column(k))
