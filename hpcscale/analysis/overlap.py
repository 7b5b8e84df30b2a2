"""Seed 001's compute / communication split, kept so users can compare with published tables.

With epoch time T, overall communication C and W, the time communication spends waiting for data
(all per epoch, s):
    Computation            = T - C
    Only communication     = C - W
    Only computation %     = Computation / T
    Overlap %              = W / T
    Only communication %   = Only communication / T
so the three percentages add up to 100.

W is the trace's waits unioned in time, inside communication: the collector's
`waits_in_comm_s`, |(∪ waits) ∩ C|, so 0 <= W <= C by construction. What a wait is, and why
its waits may overlap, is its format's: its reader under hpcscale/collect/traces/ and its
registry line's `waits` (hpcscale.model.registry.TRACE_READERS), which the report quotes. The
seed summed a timeline's two waits (`wait_for_data_s`, `wait_for_other_tensor_data_s`), but
they overlap: the sum counts that time twice and C - sum can go below zero. A wait whose
collective never closed (a killed run) lies outside every closed one, hence the intersection
with C.

A table without `waits_in_comm_s` (the seeds' tables, a frame of one's own) gives the two waits
apart. Where at most one is non-zero their union is that one; where both are, their sum stands
in for the union, as the seed did, and `waits_summed` says so (an upper bound on the overlap:
Only communication is then a lower bound). Whatever the source, a W above C is impossible: Only
communication and Overlap % are then NaN, never a negative number. CPU timelines have no waits,
so there Only communication = C. The exact view (step spans swept against the timeline) comes
from the collector as exact_* columns and is only carried along here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from hpcscale.analysis.frame import normalise
from hpcscale.model.registry import TRACE_READERS

OVERLAP_COLUMNS: tuple[str, ...] = (
    "compute_s",
    "only_comm_s",
    "only_compute_pct",
    "overlap_pct",
    "only_comm_pct",
)
# True where the two waits' sum stood in for their union (a table without waits_in_comm_s).
WAITS_SUMMED = "waits_summed"


@dataclass(frozen=True)
class Split:
    """Arrays (or scalars) of the seed's five derived quantities; percentages in 0..100.
    `waits_s` is the W used; `waits_summed` where it is the two waits' sum."""

    compute_s: np.ndarray
    only_comm_s: np.ndarray
    only_compute_pct: np.ndarray
    overlap_pct: np.ndarray
    only_comm_pct: np.ndarray
    waits_s: np.ndarray
    waits_summed: np.ndarray


def split(
    epoch_time_s: npt.ArrayLike,
    comm_s: npt.ArrayLike,
    wait_for_data_s: npt.ArrayLike = 0.0,
    wait_for_other_s: npt.ArrayLike = 0.0,
    waits_in_comm_s: npt.ArrayLike = np.nan,
) -> Split:
    """The split with W = `waits_in_comm_s` where known, else from the two waits (see the
    module); missing waits (NaN) count as zero, as on CPU timelines."""
    t, c, wfd, wfo, union = np.broadcast_arrays(
        *(
            np.asarray(v, dtype=float)
            for v in (epoch_time_s, comm_s, wait_for_data_s, wait_for_other_s, waits_in_comm_s)
        )
    )
    wfd, wfo = np.nan_to_num(wfd), np.nan_to_num(wfo)
    known = np.isfinite(union)
    waits = np.where(known, union, wfd + wfo)
    possible = waits <= c  # False where C is NaN (no timeline) or W exceeds it
    only_comm = np.where(possible, c - waits, np.nan)
    compute = t - c
    with np.errstate(divide="ignore", invalid="ignore"):
        return Split(
            compute_s=compute,
            only_comm_s=only_comm,
            only_compute_pct=100.0 * compute / t,
            overlap_pct=np.where(possible, 100.0 * waits / t, np.nan),
            only_comm_pct=100.0 * only_comm / t,
            waits_s=waits,
            waits_summed=~known & (wfd > 0) & (wfo > 0) & np.isfinite(c),
        )


def with_overlap(df: pd.DataFrame) -> pd.DataFrame:
    """Add OVERLAP_COLUMNS and WAITS_SUMMED; rows without a timeline (comm_s NaN) get NaN."""
    out = df.copy()
    parts = split(
        out["epoch_time_s"],
        out["comm_s"],
        out["wait_for_data_s"],
        out["wait_for_other_tensor_data_s"],
        out["waits_in_comm_s"] if "waits_in_comm_s" in out.columns else np.nan,
    )
    for name in OVERLAP_COLUMNS:
        out[name] = getattr(parts, name)
    out[WAITS_SUMMED] = parts.waits_summed
    return out


# Where a row's communication figures came from: the collector's `trace_source` (the trace
# reader's `label`, hpcscale.model.registry.TRACE_READERS); results collected before the column
# existed say nothing, and a row with figures but no source is said as such, never guessed.
SOURCE = "trace_source"
UNKNOWN_SOURCE = "trace (source not recorded)"


def _label(value: object) -> str:
    return value if isinstance(value, str) else ""


def cell_sources(cells: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Each cell's trace source, from its runs (`run_ids`): the one label its runs share, the
    labels joined with " + " where its repeats differ, "" where no run read a trace."""
    if SOURCE not in runs.columns or "run_ids" not in cells or runs.empty:
        return [""] * len(cells)
    runs = normalise(runs)  # the run ids derive gave the cells (a table without them: row<i>)
    per_run = dict(zip(runs["run_id"].astype(str), runs[SOURCE].map(_label), strict=True))
    out = []
    for ids in cells["run_ids"]:
        found = [per_run.get(str(i), "") for i in (ids if isinstance(ids, list | tuple) else [])]
        out.append(" + ".join(dict.fromkeys(s for s in found if s)))
    return out


def row_sources(rows: pd.DataFrame, measured: str = "comm_s") -> list[str]:
    """Per row, where its figures came from: its `trace_source`, UNKNOWN_SOURCE where the row
    has a `measured` figure but no source (older results), "" where it has no figure."""
    labels = rows[SOURCE].map(_label) if SOURCE in rows.columns else pd.Series("", rows.index)
    has = rows[measured].notna() if measured in rows.columns else pd.Series(False, rows.index)
    return [
        (s or UNKNOWN_SOURCE) if h else ""
        for s, h in zip(labels.to_list(), has.to_list(), strict=True)
    ]


def sources_phrase(sources: list[str], column: str = "From", per: str = "cell") -> str:
    """The trace(s) in words, for a section's text: each format's phrase (its registry line's
    `phrase`), "or" between them and "(the From column says which per cell)" when mixed."""
    names = {line.label: line.phrase for line in TRACE_READERS.values()}
    names[UNKNOWN_SOURCE] = (
        "the run's trace (which kind was not recorded: results collected before `trace_source`)"
    )
    found = list(dict.fromkeys(s for s in sources if s))
    if not found:
        return "the run's trace"
    said = " or ".join(names.get(s, s) for s in found)
    return said + (f" (the {column} column says which per {per})" if len(found) > 1 else "")
