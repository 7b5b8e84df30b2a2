"""The "Data quality" section (every run left out or flagged, and why) and `mark_flagged`, how
any table of cells marks the flagged ones: a "Flags" column naming the kinds of flag on the
cell's runs and a note pointing to the section, with the reason of each missing baseline.

The flags themselves come from `hpcscale.analysis.quality` (its CHECKS) and the collector; this
module only lays them out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.quality import INPUT_BOUND, Flag
from hpcscale.report.model import Section, Table

TITLE = "Data quality"
FLAGS_COLUMN = "Flags"
NONE_TEXT = "No run left out or flagged."
INPUT_BOUND_TEXT = (
    "input_bound: the run's input pipeline alone (input_images_per_s in metrics.json, all ranks "
    "together) is slower than the throughput it trained at. Its figures are kept: they are real, "
    "but they measure the input pipeline more than training or communication (more reader "
    "threads, a faster disk or caching the data set would change them)."
)
# Tables whose rows are derived cells, marked by `mark_cell_tables` (others call mark_flagged).
CELL_TABLES: frozenset[str] = frozenset({"scaling", "overhead", "overlap"})
_CUT_NOTES = ("timeline.json covers", "timeline.json ends in a cut record")
# Display column -> cell column, for matching a table's rows back to their cells.
_MATCH: dict[str, str] = {
    "Model": "model",
    "Epoch time (s)": "epoch_time_s",
    "Images/s": "images_per_s",
    "Speedup": "speedup",
    "Efficiency": "efficiency",
}


def quality_section(runs: pd.DataFrame, flags: Sequence[Flag]) -> Section:
    """Every flag (run, its cell, kind, action, reason) plus the collector's notes on runs it
    read only in part; present always, saying so when there is nothing to list."""
    rows = [_row(runs, f.run_id, f.kind, f.action, f.reason) for f in flags]
    cut = {f.run_id for f in flags if f.kind == "timeline_truncated"}  # its note said the same
    unreadable = {rid for rid, _ in runs.attrs.get("unreadable") or []}
    for rid, why in runs.attrs.get("problems") or []:
        if rid not in unreadable and not (rid in cut and why.startswith(_CUT_NOTES)):
            rows.append(_row(runs, rid, "collect_note", "flagged", why))
    text = [
        "Every run left out of the tables and figures (excluded), or kept but marked in them "
        "(flagged), and why. Tables mark the cells of such runs in their Flags column."
    ]
    if not rows:
        return Section("quality", TITLE, [NONE_TEXT])
    if any(f.kind == INPUT_BOUND for f in flags):
        text.append(INPUT_BOUND_TEXT)
    frame = pd.DataFrame(rows, columns=["Run", "Cell", "Kind", "Action", "Reason"])
    return Section("quality", TITLE, text, [Table("quality", "Runs left out or flagged", frame)])


def mark_flagged(
    table: Table, cells: pd.DataFrame, match: Mapping[str, str] | None = None
) -> Table:
    """`table` (rows are cells of `cells`, a `derive` frame with a `flags` column) with a "Flags"
    column when any of its cells is flagged, and a note giving each missing baseline's reason.

    Rows are matched back to cells on `match` (table column -> cell column; default: the model,
    the scaled axis and the measured figures the table shows); a row matching several cells
    gets all their flags. A table without flagged cells is returned unchanged."""
    if "flags" not in cells.columns or table.frame.empty or not cells["flags"].astype(bool).any():
        return table
    match = dict(match or {tables.axis_label(cells): "axis_value", **_MATCH})
    match = {t: c for t, c in match.items() if t in table.frame.columns and c in cells.columns}
    marks, reasons, shown = [], {}, set()
    for _, trow in table.frame.iterrows():
        hits = cells[
            [all(_same(trow[t], crow[c]) for t, c in match.items()) for _, crow in cells.iterrows()]
        ]
        shown.update(hits.index)
        kinds = [k for v in hits["flags"] for k in str(v).split(", ") if k]
        marks.append(", ".join(dict.fromkeys(kinds)))
        for _, c in hits.iterrows():
            if isinstance(c.get("baseline_problem"), str):
                reasons[f"{c['axis']}={c['axis_value']:g}"] = c["baseline_problem"]
    absent = cells[cells["flags"].astype(bool) & ~cells.index.isin(list(shown))]
    if not any(marks) and absent.empty:
        return table
    frame = table.frame.copy()
    note = []
    if any(marks):
        frame[FLAGS_COLUMN] = marks
        note.append(f"{FLAGS_COLUMN}: see the {TITLE} section for each run and why.")
    note += [f"{cell}: no speedup or efficiency, {why}." for cell, why in reasons.items()]
    if not absent.empty:
        left = "; ".join(
            f"{c['model']} {c['axis']}={c['axis_value']:g} ({c['flags']})"
            for _, c in absent.iterrows()
        )
        note.append(f"Left out of this table: {left}; see the {TITLE} section.")
    old = [table.note] if table.note else []
    return Table(table.key, table.title, frame, " ".join([*old, *note]))


def mark_cell_tables(section: Section, cells: pd.DataFrame) -> Section:
    """`section` with `mark_flagged` applied to its tables of cells (keys in CELL_TABLES)."""
    if not any(t.key in CELL_TABLES for t in section.tables):
        return section
    section.tables = [mark_flagged(t, cells) if t.key in CELL_TABLES else t for t in section.tables]
    return section


def _row(runs: pd.DataFrame, run_id: str, kind: str, action: str, reason: str) -> list[str]:
    return [run_id, _cell_of(runs, run_id), kind, action, reason]


def _cell_of(runs: pd.DataFrame, run_id: str) -> str:
    """The run's matrix cell, e.g. "dcgan, nodes=1, ranks=2", from its row or, for a run with
    no row (unreadable, unfinished), from the campaign's planned runs."""
    fields: Mapping[str, Any] | None = None
    if "run_id" in runs.columns and (runs["run_id"] == run_id).any():
        fields = runs[runs["run_id"] == run_id].iloc[0].to_dict()
    else:
        fields = next((p for p in runs.attrs.get("planned") or [] if p["run_id"] == run_id), None)
    if not fields:
        return ""
    parts = [str(fields.get("model") or "")]
    parts += [f"{k}={fields[k]}" for k in ("nodes", "ranks") if fields.get(k) is not None]
    return ", ".join(p for p in parts if p)


def _same(a: Any, b: Any) -> bool:
    if _nan(a) or _nan(b):
        return _nan(a) and _nan(b)
    if isinstance(a, Real) and isinstance(b, Real):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return str(a) == str(b)


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
