"""Campaigns side by side: the scale axis they share, their cells aligned on it, each later
campaign's differences from the first (within noise or not), and its regressions.

Pure functions over the tidy run table (one frame per campaign) and `derive`'s cells. A cell one
campaign planned but has no valid result for (unfinished, unreadable, no baseline) stays in the
alignment with NaN metrics and its flags, so a gap is shown as a gap, never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis import AXES
from hpcscale.analysis.context import TableContext
from hpcscale.analysis.derive import derive
from hpcscale.analysis.frame import check_axis, normalise
from hpcscale.analysis.intervals import interval
from hpcscale.analysis.noise import verdict
from hpcscale.analysis.overlap import SOURCE, UNKNOWN_SOURCE, cell_sources
from hpcscale.analysis.quality import Flag, cell_flags, quality_flags
from hpcscale.model.errors import UsageError
from hpcscale.model.scaling_metric import BUNDLED_METRIC, ScalingMetric
from hpcscale.model.vocab import CELL_FIELDS, KNOBS, arg_columns, cell_keys

# Metrics compared, and whether a higher value is better (throughput, speedup and efficiency
# are; epoch time is better lower).
HIGHER_IS_BETTER: dict[str, bool] = {
    "images_per_s": True,
    "speedup": True,
    "efficiency": True,
    "epoch_time_s": False,
}
METRICS: tuple[str, ...] = tuple(HIGHER_IS_BETTER)


def measures(metrics: Iterable[ScalingMetric] = ()) -> dict[str, bool]:
    """The columns compared, and whether higher is better, for campaigns on `metrics` (their
    scaling metrics): each one's throughput, speedup, efficiency, each one's time
    (HIGHER_IS_BETTER for the bundled programs' images/s)."""
    ms = list(dict.fromkeys(metrics)) or [BUNDLED_METRIC]
    out = {m.throughput_column: True for m in ms}
    out.update(speedup=True, efficiency=True)
    out.update({m.time_column: False for m in ms if m.time_column not in out})
    return out


# Fields a cell may differ in besides the axis: matched between campaigns when they vary at a
# size within a campaign (a sweep); fields fixed within each campaign are what tells them apart.
# Every other cell field but the campaign and its system (named apart), and every workload
# argument (`args.<name>`, after these), counts too.
MATCH_FIELDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        ("model", "scaling", "device", *KNOBS, "nodes", "ranks", "gpus", "tasks_per_node",
         "threads_per_task", "gpus_per_node", "batch_per_rank", "global_batch",
         *(f for f in CELL_FIELDS if f not in ("campaign", "system")))
    )
)  # fmt: skip
# What a run did besides its scale and knobs: campaigns that differ here measure different work.
# A row whose two cells differ in dataset_size or steps_per_epoch has epoch times that cannot be
# compared (images/s still can); `campaign_cells` brings epochs and steps_per_epoch from the runs.
WORKLOAD_FIELDS: tuple[str, ...] = ("dataset_size", "epochs", "steps_per_epoch")
EPOCH_WORK: tuple[str, ...] = ("dataset_size", "steps_per_epoch")
# Metrics measured against the campaign's own smallest size (derive's base_axis_value).
RELATIVE: tuple[str, ...] = ("speedup", "efficiency")
# The noise verdicts of a comparison made; anything else (missing, different baseline, not
# comparable) is no comparison and never a regression.
COMPARED: tuple[str, ...] = ("beyond noise", "no interval", "within noise")
DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class Regression:
    """A metric of a later campaign worse than the baseline campaign's beyond the tolerance."""

    campaign: str
    baseline: str
    metric: str
    cell: str  # e.g. "ranks=2" or "ranks=2, fusion_threshold_mb=32"
    baseline_value: float
    value: float
    change: float  # relative: (value - baseline) / baseline
    tolerance: float
    higher_is_better: bool = True

    @property
    def message(self) -> str:
        worse = "lower" if self.higher_is_better else "higher"
        return (
            f"{self.campaign}: {self.metric} at {self.cell} regressed from "
            f"{self.baseline_value:.4g} ({self.baseline}) to {self.value:.4g} "
            f"({self.change:+.1%}, {worse} is worse; tolerance {self.tolerance:.1%})"
        )


def varying_axes(runs: pd.DataFrame, ctx: TableContext | None = None) -> list[str]:
    """The scale axes that take more than one value in a campaign (its planned runs when `ctx`
    has them, so a size with no result yet still counts)."""
    planned = ctx.planned_frame if ctx is not None else None
    frame = planned if planned is not None else normalise(runs)
    return [a for a in AXES if a in frame.columns and frame[a].nunique() > 1]


def shared_axis(
    runs: Mapping[str, pd.DataFrame],
    on: str | None = None,
    contexts: Mapping[str, TableContext] | None = None,
) -> str:
    """The axis to compare on: `on` when given (it must vary in at least one campaign), else the
    first of nodes, ranks, gpus that every campaign varying an axis varies. UsageError when the
    campaigns share none, naming what each varies. `contexts`: each campaign's planned runs."""
    ctxs = contexts or {}
    varies = {name: varying_axes(frame, ctxs.get(name)) for name, frame in runs.items()}
    said = "; ".join(f"{n} varies {', '.join(v) or 'no axis'}" for n, v in varies.items())
    if on is not None:
        try:
            check_axis(on)
        except UsageError as exc:
            raise UsageError(f"--on: {exc}") from None
        if not any(on in v for v in varies.values()):
            raise UsageError(f"--on {on}: no campaign varies {on} ({said})")
        return on
    scaling = [v for v in varies.values() if v]
    if not scaling:
        return "nodes"
    common = [a for a in AXES if all(a in v for v in scaling)]
    if not common:
        raise UsageError(f"the campaigns share no scale axis ({said}); --on AXIS picks one")
    return common[0]


def campaign_cells(
    runs: pd.DataFrame, axis: str, ctx: TableContext | None = None, flags: list[Flag] | None = None
) -> pd.DataFrame:
    """A campaign's derived cells on `axis` with their `flags` (`quality_flags`: given once per
    caller), plus a row (NaN metrics, its flags) per planned cell (`ctx.planned`) with no result."""
    ctx = ctx or TableContext()
    plan = ctx.planned_frame
    cells = derive(runs, axis, planned=plan, metric=ctx.metric)
    cells[SOURCE] = cell_sources(cells, runs)  # which trace each cell's communication is from
    for f in WORKLOAD_FIELDS:
        if f not in cells.columns and {f, "run_id"} <= set(runs.columns) and len(cells):
            per_run = dict(zip(runs["run_id"].astype(str), runs[f], strict=True))
            cells[f] = [_median(per_run.get(str(i)) for i in ids) for ids in cells["run_ids"]]
    flags = quality_flags(runs, ctx) if flags is None else flags
    cells["flags"] = cell_flags(cells, flags)
    if plan is None:
        return cells
    kinds: dict[str, list[str]] = {}
    for f in flags:
        kinds.setdefault(f.run_id, []).append(f.kind)
    gone = plan[~plan["run_id"].isin(set(runs["run_id"]) if len(runs) else set())]
    keys = [k for k in cell_keys([*cells.columns, *plan.columns]) if k != "campaign"]
    known = dict(zip(combos(cells, keys), cells.index, strict=True))
    extra: dict[tuple, dict[str, Any]] = {}
    values = {c: _values(gone, c) for c in ["campaign", *keys]}
    for j, (k, run_id) in enumerate(zip(combos(gone, keys), gone["run_id"], strict=True)):
        said = kinds.get(str(run_id)) or ["unfinished"]
        if k in known:  # a repeat of a cell that has results: its flags join the cell's
            i = known[k]
            cells.at[i, "flags"] = _join(str(cells.at[i, "flags"]).split(", ") + said)
            continue
        row = extra.setdefault(k, {**{c: v[j] for c, v in values.items()}, "flags": ""})
        row["flags"] = _join(row["flags"].split(", ") + said)
        row["run_ids"] = [*row.get("run_ids", []), str(run_id)]
    if not extra:
        return cells
    gaps = pd.DataFrame(list(extra.values()))
    gaps["axis"], gaps["axis_value"], gaps["repeats"] = axis, gaps[axis], 0
    return pd.concat([cells, gaps], ignore_index=True)


def match_keys(cells: Mapping[str, pd.DataFrame], axis: str) -> list[str]:
    """Fields besides the axis that rows are matched on: those taking several values at one size
    within some campaign (a knob sweep, a swept workload argument), in MATCH_FIELDS order, then
    the `args.<name>` columns by name."""
    out = []
    args = arg_columns(c for frame in cells.values() for c in frame.columns)
    for field in (*MATCH_FIELDS, *args):
        if field == axis:
            continue
        for frame in cells.values():
            if len(frame) and field in frame.columns:
                per_size = frame.groupby("axis_value")[field].agg(lambda s: len(set(map(plain, s))))
                if (per_size > 1).any():
                    out.append(field)
                    break
    return out


def differing_at_rows(
    cells: Mapping[str, pd.DataFrame], axis: str, keys: Sequence[str], fields: Sequence[str]
) -> dict[str, list[str]]:
    """Fields (of `fields`) whose values differ between campaigns at the same aligned row (e.g.
    nodes at ranks=2: one node under mpirun, two under SLURM), with the rows' labels: part of
    what a row compares, though no campaign holds the field fixed."""
    cols = ["axis_value", *keys]
    out: dict[str, list[str]] = {}
    measured = []  # each campaign's measured cells and their row keys, once for every field
    for frame in cells.values():
        reps = pd.Series(_values(frame, "repeats"), index=frame.index, dtype=float)
        frame = frame[reps.fillna(0).to_numpy() > 0]
        measured.append((frame, combos(frame, cols)))
    for field in fields:
        seen: dict[tuple, set] = {}
        for frame, rows_of in measured:
            if field in frame.columns:
                for k, v in zip(rows_of, _values(frame, field), strict=True):
                    seen.setdefault(k, set()).add(plain(v))
        rows = [
            _label(axis, cols, k)
            for k, v in sorted(seen.items(), key=lambda kv: _sort_key(kv[0]))
            if len(v) > 1
        ]
        if rows:
            out[field] = rows
    return out


def align(
    cells: Mapping[str, pd.DataFrame], axis: str, metrics: Iterable[str] = METRICS
) -> tuple[pd.DataFrame, list[str]]:
    """One row per (campaign, aligned row): `row` (shared by the campaigns' matching cells),
    `campaign`, `cell` (its label), the axis value, the match keys, `metrics` (`measures`
    of the campaigns' scaling metrics: METRICS for images/s) with `_lo`/`_hi`
    (`_level`: the interval's own), the measured communication (`comm_s`, `comm_share`,
    `trace_source`), `flags`, `repeats`, `base_repeats`; and the match keys.
    Every row appears for every campaign: NaN metrics (and `present` False) where a campaign
    has no measured such cell."""
    keys = match_keys(cells, axis)
    metrics = tuple(metrics)
    cols = ["axis_value", *keys]
    entries: dict[tuple, dict[str, dict]] = {}
    for name, frame in cells.items():
        for k, r in zip(combos(frame, cols), frame.to_dict("records"), strict=True):
            entries.setdefault(k, {})[name] = r
    order = sorted(entries, key=_sort_key)
    rows = []
    for i, k in enumerate(order):
        label = _label(axis, cols, k)
        for name in cells:
            r = entries[k].get(name)
            row: dict[str, Any] = {"row": i, "campaign": name, "cell": label}
            row.update(zip(cols, k, strict=True))
            row["present"] = r is not None and int(r.get("repeats") or 0) > 0
            for m in metrics:
                lo, hi = interval(r, m) if r is not None else (np.nan, np.nan)
                row[m] = float(r[m]) if r is not None and m in r else np.nan
                row[f"{m}_lo"], row[f"{m}_hi"] = lo, hi
                row[f"{m}_level"] = float(r.get(f"{m}_level", np.nan)) if r is not None else np.nan
            for f in ("base_axis_value", *WORKLOAD_FIELDS):
                row[f] = plain(r.get(f)) if r is not None else None
            row.update(_communication(r))
            row["flags"] = "" if r is None else str(r.get("flags") or "")
            row["repeats"] = 0 if r is None else int(r.get("repeats") or 0)
            row["base_repeats"] = np.nan if r is None else r.get("base_repeats", np.nan)
            rows.append(row)
    return pd.DataFrame(rows), keys


def _communication(cell: Mapping[str, Any] | None) -> dict[str, Any]:
    """A cell's measured communication for the aligned rows: `comm_s` (per epoch), `comm_share`
    (of the epoch time, 0-1) and `trace_source` (where they came from: "" without a figure,
    UNKNOWN_SOURCE for results collected before the column existed)."""
    comm = np.nan if cell is None else _float(cell.get("comm_s"))
    epoch = np.nan if cell is None else _float(cell.get("epoch_time_s"))
    source = "" if cell is None else cell.get(SOURCE)
    share = comm / epoch if math.isfinite(comm) and math.isfinite(epoch) and epoch > 0 else np.nan
    known = isinstance(source, str) and source
    return {
        "comm_s": comm,
        "comm_share": share,
        SOURCE: (source if known else UNKNOWN_SOURCE) if math.isfinite(comm) else "",
    }


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def differences(
    aligned: pd.DataFrame,
    baseline: str,
    tolerance: float = DEFAULT_TOLERANCE,
    higher_is_better: Mapping[str, bool] = HIGHER_IS_BETTER,
    metrics: Mapping[str, ScalingMetric] | None = None,
) -> pd.DataFrame:
    """Per later campaign, aligned row and metric: baseline and campaign values, the relative
    change, `noise` ('within noise', 'beyond noise', 'no interval'; or, not compared: 'missing'
    when one side has no value, 'different baseline (nodes=1 vs 2)' for speedup and efficiency
    measured against different sizes, 'not comparable (dataset_size differs)' for epoch times of
    different work, or of two campaigns' different scaling metrics: `metrics`, campaign -> its
    own), `better` (True/False, None unless beyond noise) and `regressed`: worse by more than
    `tolerance` (relative) and beyond noise. The columns compared are `higher_is_better`'s
    (`measures`)."""
    own = metrics or {}
    out = []
    base = {b["row"]: b for b in aligned[aligned["campaign"] == baseline].to_dict("records")}
    later = aligned[aligned["campaign"] != baseline]
    unlikes = {c: _unlike(own, baseline, c) for c in map(str, later["campaign"].unique())}
    for r in later.to_dict("records"):  # no Series per row
        b = base[r["row"]]
        unlike = unlikes[str(r["campaign"])]
        for m, higher in higher_is_better.items():
            theirs = m
            if unlike is not None and m in unlike[0]:
                if m not in unlike[2]:  # the other campaign's own column: said on the baseline's
                    continue
                theirs = unlike[2][m]  # its figure in the same role (throughput, time)
            a_val, c_val = float(b[m]), float(r[theirs])
            if math.isnan(a_val) and math.isnan(c_val):
                continue
            change = (c_val - a_val) / a_val if a_val else np.nan
            apart = incomparable(b, r, m)
            if unlike is not None and m in unlike[0]:
                # two different quantities: no change, no verdict, never a regression
                noise, better, change = unlike[1], None, np.nan
            elif math.isnan(a_val) or math.isnan(c_val):
                noise, better = "missing", None
            elif apart:
                noise, better = apart, None
            else:
                said = verdict(c_val, interval(r, m), a_val, interval(b, m), higher)
                noise = {"faster": "beyond noise", "slower": "beyond noise"}.get(said, said)
                better = {"faster": True, "slower": False}.get(said)
            worse_by = -change if higher else change
            regressed = bool(noise in COMPARED[:2] and worse_by > tolerance)
            out.append(
                {
                    "row": r["row"],
                    "cell": r["cell"],
                    "campaign": r["campaign"],
                    "metric": m,
                    "baseline": a_val,
                    "value": c_val,
                    "change": change,
                    "noise": noise,
                    "better": better,
                    "regressed": regressed,
                    "flags": _join([*str(b["flags"]).split(", "), *str(r["flags"]).split(", ")]),
                }
            )
    return pd.DataFrame(out)


def _unlike(
    own: Mapping[str, ScalingMetric], baseline: str, campaign: str
) -> tuple[set[str], str, dict[str, str]] | None:
    """When two campaigns scale on different metrics (samples/s against images/s, a `time:`
    metric against an epoch time): the columns that then hold different quantities (each
    metric's own, and a column only one of them compares), why, and the baseline's such
    columns -> the other's in the same role (each pair is one row, not compared); None when
    they agree."""
    a, c = own.get(baseline), own.get(campaign)
    if a is None or c is None or a == c:
        return None
    mine, theirs = {a.throughput_column, a.time_column}, {c.throughput_column, c.time_column}
    cols = (mine ^ theirs) | {m.name for m in (a, c) if not m.usual}
    pair = {a.throughput_column: c.throughput_column, a.time_column: c.time_column}
    said = f"not comparable ({baseline}: {a.heading}, {campaign}: {c.heading})"
    return cols, said, {m: o for m, o in pair.items() if m in cols}


def incomparable(base: Mapping[str, Any], row: Mapping[str, Any], metric: str) -> str | None:
    """Why the two cells' values of `metric` measure different things (None when they do not):
    speedup and efficiency against different baseline sizes, epoch time of different work."""
    if metric in RELATIVE:
        a, c = plain(base.get("base_axis_value")), plain(row.get("base_axis_value"))
        if a is not None and c is not None and a != c:
            return f"different baseline ({_axis_of(row)}={fmt_value(a)} vs {fmt_value(c)})"
    if metric == "epoch_time_s":
        for f in EPOCH_WORK:
            a, c = plain(base.get(f)), plain(row.get(f))
            if a is not None and c is not None and a != c:
                return f"not comparable ({f} differs)"
    return None


def compared(diffs: pd.DataFrame) -> int:
    """How many metric comparisons gave a verdict (neither missing nor incomparable)."""
    return 0 if diffs.empty else int(diffs["noise"].isin(COMPARED).sum())


def missing_cells(diffs: pd.DataFrame, baseline: str, lost_only: bool = False) -> list[str]:
    """Cells with a value on one side only, not compared: '<later>: <cell>' where the later
    campaign lacks it, '<baseline>: <cell> (vs <later>)' where the baseline does (left out
    when `lost_only`)."""
    if diffs.empty:
        return []
    gone = diffs[diffs["noise"] == "missing"]
    if lost_only:
        gone = gone[gone["value"].isna()]
    return list(
        dict.fromkeys(
            f"{r['campaign']}: {r['cell']}"
            if math.isnan(r["value"])
            else f"{baseline}: {r['cell']} (vs {r['campaign']})"
            for r in gone.to_dict("records")
        )
    )


def regressions(
    diffs: pd.DataFrame,
    baseline: str,
    tolerance: float,
    higher_is_better: Mapping[str, bool] = HIGHER_IS_BETTER,
) -> list[Regression]:
    """The rows of `differences` that regressed, as Regression records."""
    if diffs.empty:
        return []
    return [
        Regression(
            str(d["campaign"]),
            baseline,
            str(d["metric"]),
            str(d["cell"]),
            float(d["baseline"]),
            float(d["value"]),
            float(d["change"]),
            tolerance,
            higher_is_better.get(str(d["metric"]), True),
        )
        for d in diffs[diffs["regressed"]].to_dict("records")
    ]


def plain(value: Any) -> Any:
    """A hashable key value: NaN and None alike, numpy scalars as Python ones."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def combos(frame: pd.DataFrame, cols: Sequence[str]) -> list[tuple]:
    """Each row's `plain` values of `cols`, e.g. the match keys (None for a column the frame
    lacks; an empty tuple each for no columns), built a column at a time: a Series per row
    (iterrows) made compare and the report quadratic in cells."""
    values = [[plain(v) for v in _values(frame, c)] for c in cols]
    return list(zip(*values, strict=True)) if cols else [()] * len(frame)


def _values(frame: pd.DataFrame, col: str) -> list:
    return frame[col].tolist() if col in frame.columns else [None] * len(frame)


def first_value(values: pd.Series) -> object:
    v = plain(values.iloc[0]) if len(values) else None
    return "default" if v is None else v


def _median(values: Any) -> Any:
    got = [float(v) for v in values if plain(v) is not None]
    return float(np.median(got)) if got else None


def _axis_of(row: Mapping[str, Any]) -> str:
    return str(row["cell"]).split("=", 1)[0] if "cell" in row else "axis"


def _sort_key(key: tuple) -> tuple:
    """Rows ordered by the match keys, then the axis value; None (default) after values."""
    ordered = (*key[1:], key[0])
    return tuple((v is None, str(type(v)), 0 if v is None else v) for v in ordered)


def _label(axis: str, cols: Sequence[str], key: tuple) -> str:
    parts = [f"{axis}={fmt_value(key[0])}"]
    parts += [f"{c}={fmt_value(v)}" for c, v in zip(cols[1:], key[1:], strict=True)]
    return ", ".join(parts)


def fmt_value(value: Any) -> str:
    if value is None:
        return "default"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _join(kinds: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(k for k in kinds if k))
