"""Data quality: every run the report leaves out or flags, and why.

A figure silently built on missing or damaged data is worse than no figure, so each check here
returns `Flag`s; the report's "Data quality" section lists all of them and the tables mark the
flagged runs. Checks are pure functions of the tidy run table (one row per run, collector
columns) and what travels beside it (analysis.context.TableContext: planned, unreadable and
unfinished runs), and are registered in CHECKS; adding a check is one function plus one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from hpcscale.analysis import EXACT_COLUMNS, TIMELINE_COLUMNS, contention
from hpcscale.analysis.context import TableContext
from hpcscale.analysis.derive import derive
from hpcscale.analysis.frame import normalise
from hpcscale.analysis.memo import FrameMemo
from hpcscale.analysis.scaling import with_throughput

# "excluded": the run's figures (or some of them) are left out of tables and figures;
# "flagged": kept, but marked where it is shown.
Action = Literal["excluded", "flagged"]


@dataclass(frozen=True)
class Flag:
    run_id: str
    kind: str  # short, stable key: "unreadable_results", "timeline_truncated", "overlap", ...
    action: Action
    reason: str  # one sentence a reader understands without the code


# (runs, what travels beside them, their `derive` cells when already derived) -> flags
Check = Callable[[pd.DataFrame, TableContext, pd.DataFrame | None], list[Flag]]
NONE = TableContext()  # a table known by its rows alone

CHECKS: list[Check] = []
# The frame `quality_flags` normalised and hands its checks now: a check that also takes raw
# tables need not normalise it again (normalise(normalise(t)) computes, costly at 1,000 runs).
_FLAGGING: ContextVar[pd.DataFrame | None] = ContextVar("_FLAGGING", default=None)
# Per-epoch figures a truncated timeline gets wrong (they count part of the run only).
PARTIAL_TIMELINE_COLUMNS: tuple[str, ...] = (
    *TIMELINE_COLUMNS,
    *EXACT_COLUMNS,
    "queue_s",
    "memcpy_s",
)
INPUT_BOUND = "input_bound"


def unreadable_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Finished runs whose results the collector could not read (`ctx.unreadable`)."""
    return [
        Flag(rid, "unreadable_results", "excluded", f"results unreadable, run left out: {why}")
        for rid, why in ctx.unreadable
    ]


def unfinished_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Runs planned but not finished yet (`ctx.unfinished`): not in any figure."""
    return [
        Flag(rid, "unfinished", "excluded", "not finished (no metrics.json yet), left out")
        for rid in ctx.unfinished
    ]


def not_completed_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Runs whose last known state is not COMPLETED (`ctx.not_completed`): whatever they
    printed, not measurements; their state and reason, never a figure."""
    return [
        Flag(rid, "not_completed", "excluded", f"{state}: {why}; not a measurement, left out")
        for rid, state, why in ctx.not_completed
    ]


def truncated_timeline_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Runs whose timeline is cut or ends before the last timed step (`timeline_truncated`);
    excluded unless `ctx.include_partial` (--include-partial-timelines)."""
    if "timeline_truncated" not in runs.columns:
        return []
    kept = ctx.include_partial
    out = []
    cut = runs[runs["timeline_truncated"].fillna(False).astype(bool)]
    for row in cut.to_dict("records"):
        cov = row.get("timeline_coverage")
        covers = "" if pd.isna(cov) else f" covers {100 * float(cov):.0f} % of the timed window"
        what = f"timeline{covers} (cut, or ends before the last timed step): "
        what += (
            "its per-epoch timeline figures are kept (--include-partial-timelines)"
            if kept
            else "its per-epoch timeline figures are left out (--include-partial-timelines "
            "keeps them)"
        )
        out.append(
            Flag(str(row["run_id"]), "timeline_truncated", "flagged" if kept else "excluded", what)
        )
    return out


def baseline_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Runs in a group whose baseline cell has no valid result: no speedup or efficiency."""
    if runs.empty:
        return []
    cells = _derived(runs, ctx, cells)
    bad = cells[cells["baseline_problem"].notna()]
    return [
        Flag(str(rid), "no_baseline", "excluded", f"no speedup or efficiency: {problem}")
        for problem, ids in zip(bad["baseline_problem"], bad["run_ids"], strict=True)
        for rid in ids
    ]


CHECKS += [unreadable_check, unfinished_check, truncated_timeline_check, baseline_check]
CHECKS += [not_completed_check]


def without_partial_timelines(runs: pd.DataFrame, include: bool = False) -> pd.DataFrame:
    """The runs with truncated timelines' per-epoch figures set to NaN (shown as missing), unless
    `include` (the choice travels in TableContext.include_partial for the checks to say)."""
    out = runs.copy()
    if include or "timeline_truncated" not in out.columns:
        return out
    cut = out["timeline_truncated"].fillna(False).astype(bool)
    cols = [c for c in PARTIAL_TIMELINE_COLUMNS if c in out.columns]
    out.loc[cut, cols] = float("nan")
    return out


def cell_flags(cells: pd.DataFrame, flags: Sequence[Flag]) -> pd.Series:
    """Per derived cell (`derive` output: `run_ids`), the kinds of flag on its runs, in check
    order and joined by ", " ("" for a clean cell): what tables show in their "Flags" column."""
    kinds: dict[str, list[str]] = {}
    for f in flags:
        kinds.setdefault(f.run_id, [])
        if f.kind not in kinds[f.run_id]:
            kinds[f.run_id].append(f.kind)

    def of(run_ids: object) -> str:
        found = [
            k for rid in (run_ids if isinstance(run_ids, list) else []) for k in kinds.get(rid, [])
        ]
        return ", ".join(dict.fromkeys(found))

    return pd.Series([of(v) for v in cells["run_ids"]], index=cells.index, dtype=object)


def overlap_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Runs that shared their machine with another run of the table (analysis.contention)."""
    return [Flag(f.run_id, "overlap", "flagged", f.reason) for f in _overlap_findings(runs)]


def busy_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Runs measured while other processes took the CPUs they needed (analysis.contention)."""
    return [Flag(f.run_id, "busy", "flagged", f.reason) for f in _busy_findings(runs)]


# findings by run table: the overlap and busy checks' own, and superlinear_check's causes
_OVERLAPS: FrameMemo[list[contention.Finding]] = FrameMemo(list)
_BUSY: FrameMemo[list[contention.Finding]] = FrameMemo(list)


def _overlap_findings(runs: pd.DataFrame) -> list[contention.Finding]:
    return _OVERLAPS.get(runs, None, lambda: contention.overlap_findings(runs))


def _busy_findings(runs: pd.DataFrame) -> list[contention.Finding]:
    return _BUSY.get(runs, None, lambda: contention.busy_findings(runs))


def superlinear_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Efficiency above 1, naming the cause when the baseline run is flagged overlap or busy."""
    if runs.empty or "run_id" not in runs.columns:
        return []
    tainted = contention.contaminated_runs(
        [("overlap", f) for f in _overlap_findings(runs)]
        + [("busy", f) for f in _busy_findings(runs)]
    )
    return [
        Flag(f.run_id, "superlinear", "flagged", f.reason)
        for f in contention.superlinear_findings(
            beyond_resolution(_derived(runs, ctx, cells)), tainted
        )
    ]


def beyond_resolution(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with an efficiency the clock's resolution cannot explain: one within
    1 + `efficiency_tolerance` (analysis.resolution) is no finding, so its efficiency is
    blanked here (the cells themselves keep theirs)."""
    if "efficiency_tolerance" not in cells.columns or "efficiency" not in cells.columns:
        return cells
    eff = pd.to_numeric(cells["efficiency"], errors="coerce")
    tol = pd.to_numeric(cells["efficiency_tolerance"], errors="coerce").fillna(0.0)
    return cells.assign(efficiency=eff.where(eff > 1.0 + tol))


def input_bound_check(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """Runs whose input pipeline alone (`input_images_per_s`, all ranks) delivers fewer images/s
    than the run trained at (cached data, or the pipeline limits the run), or at most
    INPUT_MARGIN above it (close to input-bound: a little more load and it would be). Flagged,
    kept. Runs that did not measure their pipeline (NaN) are not judged."""
    if runs.empty or "input_images_per_s" not in runs.columns:
        return []
    if runs is not _FLAGGING.get():  # callers other than quality_flags pass raw tables
        runs = normalise(runs)
    trained = with_throughput(runs)["images_per_s"].to_numpy(float)
    pipeline = pd.to_numeric(runs["input_images_per_s"], errors="coerce").to_numpy(float)
    near = np.isfinite(trained) & np.isfinite(pipeline) & (pipeline <= INPUT_MARGIN * trained)
    return [
        Flag(str(rid), INPUT_BOUND, "flagged", _input_reason(p, t))
        for rid, p, t in zip(runs["run_id"][near], pipeline[near], trained[near], strict=True)
    ]


INPUT_MARGIN = 1.1  # a pipeline at most 10 % faster than training is close to input-bound


def _input_reason(pipeline: float, trained: float) -> str:
    if pipeline < trained:
        return (
            f"input-bound: the input pipeline alone measured {pipeline:.4g} images/s, below the "
            f"{trained:.4g} images/s trained (cached data, or the pipeline limits the run)"
        )
    return (
        f"close to input-bound: the input pipeline alone measured {pipeline:.4g} images/s, "
        f"within 10 % of the {trained:.4g} images/s trained: the run is close to input-bound"
    )


CHECKS += [overlap_check, busy_check, superlinear_check, input_bound_check]


def quality_flags(
    runs: pd.DataFrame, ctx: TableContext = NONE, cells: pd.DataFrame | None = None
) -> list[Flag]:
    """All flags of all registered checks, in check order. Checks see the frame `normalise`d
    (the contract's columns filled, run ids as `derive` names them) and `ctx`, what travels
    beside it (planned, unreadable and unfinished runs, the --include-partial-timelines
    choice). `cells`: `derive(runs, planned=ctx.planned_frame, metric=ctx.metric)` when the
    caller has it (the checks that need cells derive them once otherwise)."""
    runs = normalise(runs) if len(runs) else runs
    if cells is None and len(runs):
        cells = derive(runs, planned=ctx.planned_frame, metric=ctx.metric)
    token = _FLAGGING.set(runs)
    try:
        return [flag for check in CHECKS for flag in check(runs, ctx, cells)]
    finally:
        _FLAGGING.reset(token)


def _derived(runs: pd.DataFrame, ctx: TableContext, cells: pd.DataFrame | None) -> pd.DataFrame:
    """The runs' cells on the default axis: `cells` when given, else derived."""
    return (
        cells if cells is not None else derive(runs, planned=ctx.planned_frame, metric=ctx.metric)
    )
