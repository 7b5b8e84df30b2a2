"""The "Data quality" section (every run left out or flagged, and why) and `mark_flagged`, how
any table of cells marks the flagged ones: a "Flags" column naming the kinds of flag on the
cell's runs and a note pointing to the section, with the reason of each missing baseline.

The flags themselves come from `hpcscale.analysis.quality` (its CHECKS) and the collector; this
module only lays them out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.context import TableContext
from hpcscale.analysis.quality import INPUT_BOUND, Flag
from hpcscale.model.scaling_metric import BUNDLED_METRIC, ScalingMetric
from hpcscale.report.model import Section, Table
from hpcscale.report.sections.unparsed import reason_line, unparsed_text

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
CELL_TABLES: frozenset[str] = frozenset({"scaling", "overhead", "overlap", "overlap_per_step"})
# The collector's note on a cut trace, whatever its format (hpcscale.collect.run_row's
# TRUNCATION_NOTE and TRACE_CUT_NOTE: `timeline.json covers ...`, `traces/rank<r>.json[.gz] ends
# in a cut record ...`): the timeline_truncated flag says the same, so it is folded into it.
_CUT_NOTE = re.compile(r"\S+ (covers \d+ % of the timed window|ends in a cut record)")
# Display column -> cell column, for matching a table's rows back to their cells.
_MATCH: dict[str, str] = {
    "Model": "model",
    "Speedup": "speedup",
    "Efficiency": "efficiency",
}


def quality_section(
    runs: pd.DataFrame, flags: Sequence[Flag], context: TableContext | None = None
) -> Section:
    """Every flag (run, its cell, kind, action, reason) plus the collector's notes on runs it
    read only in part (`context.problems`); present always, saying so when there is nothing to
    list."""
    ctx = context or TableContext()
    cell_of = _cells_by_run(runs, ctx)
    rows = [[f.run_id, cell_of(f.run_id), f.kind, f.action, reason_line(f.reason)] for f in flags]
    cut = {f.run_id for f in flags if f.kind == "timeline_truncated"}  # its note said the same
    unreadable = {rid for rid, _ in ctx.unreadable}
    for rid, why in ctx.problems:
        if rid not in unreadable and not (rid in cut and _CUT_NOTE.match(why)):
            rows.append([rid, cell_of(rid), "collect_note", "flagged", why])
    text = [
        "Every run left out of the tables and figures (excluded), or kept but marked in them "
        "(flagged), and why. Tables mark the cells of such runs in their Flags column."
    ]
    if not rows:
        return Section("quality", TITLE, [NONE_TEXT])
    if any(f.kind == INPUT_BOUND for f in flags):
        text.append(INPUT_BOUND_TEXT)
    said, lines = unparsed_text(ctx.unreadable)  # a metric that matched nothing, and where
    frame = pd.DataFrame(rows, columns=["Run", "Cell", "Kind", "Action", "Reason"])
    tables = [Table("quality", "Runs left out or flagged", frame), *lines]
    return Section("quality", TITLE, [*text, *said], tables)


def mark_flagged(
    table: Table,
    cells: pd.DataFrame,
    match: Mapping[str, str] | None = None,
    metric: ScalingMetric = BUNDLED_METRIC,
) -> Table:
    """`table` (rows are cells of `cells`, a `derive` frame with a `flags` column) with a "Flags"
    column when any of its cells is flagged, and a note giving each missing baseline's reason.

    Rows are matched back to cells on `match` (table column -> cell column; default: the model,
    the scaled axis and the measured figures the table shows, headed by `metric`); a row
    matching several cells gets all their flags. A table without flagged cells is returned
    unchanged.

    The match is a join (values equal as text, numbers to 9 significant digits, missing to
    missing) of the table's rows with the flagged cells only: linear in rows, where comparing
    every row with every cell made a 1,000-cell report quadratic."""
    if "flags" not in cells.columns or table.frame.empty or not cells["flags"].astype(bool).any():
        return table
    match = dict(match or {tables.axis_label(cells): "axis_value", **_match(metric)})
    match = {t: c for t, c in match.items() if t in table.frame.columns and c in cells.columns}
    problem = cells["baseline_problem"] if "baseline_problem" in cells.columns else None
    has_problem = (
        problem.map(lambda v: isinstance(v, str)).to_numpy(bool)
        if problem is not None
        else np.zeros(len(cells), bool)
    )
    marked = cells[cells["flags"].astype(bool).to_numpy() | has_problem]
    pairs, shown = _matches(table.frame, marked, match)
    kinds: dict[int, dict[str, None]] = {}
    for row, text in pairs:
        kinds.setdefault(row, {}).update(dict.fromkeys(k for k in text.split(", ") if k))
    marks = [", ".join(kinds.get(row, ())) for row in range(len(table.frame))]
    reasons: dict[str, str] = {}
    if problem is not None:
        hit = marked.loc[shown]
        for axis, value, why in zip(
            hit["axis"], hit["axis_value"], hit["baseline_problem"], strict=True
        ):
            if isinstance(why, str):
                reasons[f"{axis}={value:g}"] = why
    absent = cells[cells["flags"].astype(bool) & ~cells.index.isin(shown)]
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


def _match(metric: ScalingMetric) -> dict[str, str]:
    """_MATCH with the time and throughput headed and keyed as `metric` heads them."""
    return {
        "Model": "model",
        metric.time_heading: metric.time_column,
        metric.throughput_heading: metric.throughput_column,
        **{k: v for k, v in _MATCH.items() if k != "Model"},
    }


def mark_cell_tables(
    section: Section, cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC
) -> Section:
    """`section` with `mark_flagged` applied to its tables of cells (keys in CELL_TABLES)."""
    if not any(t.key in CELL_TABLES for t in section.tables):
        return section
    section.tables = [
        mark_flagged(t, cells, metric=metric) if t.key in CELL_TABLES else t for t in section.tables
    ]
    return section


def _matches(
    frame: pd.DataFrame, cells: pd.DataFrame, match: Mapping[str, str]
) -> tuple[list[tuple[int, str]], pd.Index]:
    """(row, flags) pairs: the position of each table row and the flags text of the cells it
    matches on every `match` pair (all cells when there is nothing to match on), each text once
    per row, in row order and, within a row, in the order the cells first show it; and the
    index of every cell some row matches. A join through a dict of the cells' keys (pandas'
    merges of text keys cost more than the join itself: 4 tables of a 1,000-cell sweep)."""
    flags = [str(v) for v in cells["flags"]]
    if not match:
        every = list(dict.fromkeys(flags))
        return [(row, text) for row in range(len(frame)) for text in every], cells.index
    rows = list(zip(*([_key(v) for v in frame[t]] for t in match), strict=True))
    keys = list(zip(*([_key(v) for v in cells[c]] for c in match.values()), strict=True))
    texts: dict[tuple[str, ...], dict[str, None]] = {}
    for key, text in zip(keys, flags, strict=True):
        texts.setdefault(key, {})[text] = None
    pairs = [(row, text) for row, key in enumerate(rows) for text in texts.get(key, ())]
    shown = set(rows)
    return pairs, cells.index[np.array([key in shown for key in keys], dtype=bool)]


def _cells_by_run(runs: pd.DataFrame, ctx: TableContext) -> Callable[[str], str]:
    """run id -> its matrix cell, e.g. "dcgan, nodes=1, ranks=2", from its row or, for a run
    with no row (unreadable, unfinished), from the campaign's planned runs (one pass each)."""
    cols = [c for c in ("run_id", "model", "nodes", "ranks") if c in runs.columns]
    rows: dict[str, Mapping[str, Any]] = {}
    if "run_id" in cols:
        for r in runs[cols].to_dict("records"):
            rows.setdefault(str(r["run_id"]), r)

    def cell_of(run_id: str) -> str:
        fields = rows.get(run_id) or ctx.planned_by_id.get(run_id)
        if not fields:
            return ""
        parts = [str(fields.get("model") or "")]
        parts += [f"{k}={fields[k]}" for k in ("nodes", "ranks") if fields.get(k) is not None]
        return ", ".join(p for p in parts if p)

    return cell_of


def _key(v: Any) -> str:
    """A value as `mark_flagged` compares it: missing as one value, numbers to 9 significant
    digits (1 and 1.0 alike), anything else as its text."""
    kind = type(v)  # the usual types first: isinstance against numbers.Real is slow
    if kind is str:
        return v
    if kind is float:
        return "\0missing" if v != v else f"{v:.9g}"
    if kind is int:
        return f"{float(v):.9g}"
    if _nan(v):
        return "\0missing"
    if isinstance(v, Real):
        return f"{float(v):.9g}"
    return str(v)


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
