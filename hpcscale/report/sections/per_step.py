"""The overlap section's per-traced-step table: what a profiler trace whose window is shorter
than the run (collect.trace_window) can say. Its per-epoch columns are rightly empty (nothing
is scaled up from a window), so its cells would show nothing; the collector's per-step columns
(rank 0's mean over the traced steps) go in a table of their own, never in the per-epoch table's
columns, with the number of traced steps beside them."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.overlap import row_sources, sources_phrase
from hpcscale.model.vocab import term
from hpcscale.report.model import Section, Table

STEP_COLUMNS: tuple[str, ...] = (
    "compute_per_step_s",
    "comm_per_step_s",
    "overlap_per_step_s",
    "exposed_comm_per_step_s",
)
TRACED = "traced_steps"
TITLE = "Compute and communication per traced step (s)"


def per_step_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells with per-step figures and no per-epoch communication (a shorter window)."""
    if "comm_per_step_s" not in cells.columns:
        return cells.iloc[:0]
    empty = cells["comm_s"].isna() if "comm_s" in cells.columns else True
    return cells[empty & cells["comm_per_step_s"].notna()]


def per_step_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per cell: its scale, model, batch, traced steps and the per-step split (s)."""
    order = [c for c in ("model", "axis_value", "scaling") if c in rows.columns]
    rows = rows.sort_values(order, kind="stable") if order else rows
    out = pd.DataFrame(
        {
            tables.axis_label(rows): rows["axis_value"],
            "Scaling": rows["scaling"].map(tables.SCALING_MARK),
            "Model": rows["model"],
            "Batch": rows["batch_per_rank"],
            term(TRACED).label: rows[TRACED] if TRACED in rows.columns else float("nan"),
        },
        index=rows.index,
    )
    for col in STEP_COLUMNS:
        out[f"{term(col).label} (s)"] = rows[col] if col in rows.columns else float("nan")
    return out.reset_index(drop=True)


def per_step_part(cells: pd.DataFrame) -> tuple[list[str], list[Table]]:
    """The paragraph and table for the per-step cells (none: nothing)."""
    rows = per_step_cells(cells)
    if rows.empty:
        return [], []
    text = (
        f"{len(rows)} cell(s) were traced over a window shorter than the run "
        "(collect.trace_window): their per-epoch figures are left empty (nothing is scaled "
        f"up from a window) and the table '{TITLE}' gives them per traced step instead, rank "
        "0's mean over the steps the window holds (the Traced steps column): compute, "
        "communication (the union of the step's collectives), the part of it overlapped by "
        "compute and the part exposed. Per-step and per-epoch figures are never in one column."
    )
    return [text], [Table("overlap_per_step", TITLE, per_step_table(rows))]


def per_step_section(cells: pd.DataFrame) -> Section | None:
    """The overlap section when no cell has per-epoch figures, only per-step ones."""
    text, found = per_step_part(cells)
    if not found:
        return None
    source = sources_phrase(row_sources(per_step_cells(cells), "comm_per_step_s"))
    return Section("overlap", "Compute / communication overlap", [f"From {source}.", *text], found)
