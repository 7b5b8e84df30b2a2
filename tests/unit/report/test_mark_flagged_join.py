"""`mark_flagged` joins a table's rows with the flagged cells through a dict of their keys
(#28: pandas merges of text keys cost more than the join). Random tables and cells (missing
values, NaN, duplicated cells, numbers equal to 9 digits, a number and its text) are marked
as the definition says, worked out here the slow way: every row compared with every cell."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcscale.report.model import Table
from hpcscale.report.sections.quality import FLAGS_COLUMN, TITLE, mark_flagged

# values alike by the definition: 1, 1.0 and "1"; 2.5 and 2.5000000001 (9 digits); None, NaN
VALUES = [1, 1.0, "1", 2.5, 2.5000000001, 3, "a", "b", None, math.nan]
FLAGS = ["", "overlap", "busy", "overlap, busy", "busy, overlap", "no_baseline"]
PROBLEMS = [None, None, "the baseline run failed", "no baseline cell"]
MATCH = {"Model": "model", "Images/s": "images_per_s"}


def same(a: Any, b: Any) -> bool:
    """The definition: missing equals missing, numbers to 9 significant digits, else text."""
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
    if any(missing):
        return all(missing)

    def text(v: Any) -> str:
        return format(float(v), ".9g") if isinstance(v, int | float) else str(v)

    return text(a) == text(b)


def expected(frame: pd.DataFrame, cells: pd.DataFrame, match: dict[str, str]) -> tuple:
    """(Flags column or None, note): each row against each cell."""
    marks, matched = [], set()
    for i in range(len(frame)):
        kinds: list[str] = []
        for j in range(len(cells)):
            if all(same(frame[t].iloc[i], cells[c].iloc[j]) for t, c in match.items()):
                matched.add(j)
                kinds += [k for k in cells["flags"].iloc[j].split(", ") if k and k not in kinds]
        marks.append(", ".join(kinds))
    note = []
    if any(marks):
        note.append(f"{FLAGS_COLUMN}: see the {TITLE} section for each run and why.")
    reasons: dict[str, str] = {}
    for j in sorted(matched):
        why = cells["baseline_problem"].iloc[j]
        if isinstance(why, str):
            reasons[f"{cells['axis'].iloc[j]}={cells['axis_value'].iloc[j]:g}"] = why
    note += [f"{cell}: no speedup or efficiency, {why}." for cell, why in reasons.items()]
    absent = [j for j in range(len(cells)) if cells["flags"].iloc[j] and j not in matched]
    if absent:
        left = "; ".join(
            f"{cells['model'].iloc[j]} {cells['axis'].iloc[j]}={cells['axis_value'].iloc[j]:g} "
            f"({cells['flags'].iloc[j]})"
            for j in absent
        )
        note.append(f"Left out of this table: {left}; see the {TITLE} section.")
    return (marks if any(marks) else None), " ".join(note)


cell = st.tuples(
    st.sampled_from(VALUES),
    st.sampled_from(VALUES),
    st.sampled_from(FLAGS),
    st.sampled_from(PROBLEMS),
    st.sampled_from([1, 2, 4]),
)
row = st.tuples(st.sampled_from(VALUES), st.sampled_from(VALUES))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(cell, min_size=1, max_size=12),
    st.lists(row, min_size=1, max_size=10),
    st.booleans(),
)
def test_rows_marked_as_every_row_against_every_cell(
    cell_rows: list[tuple], table_rows: list[tuple], copies: bool
) -> None:
    """`copies`: the cells again, as a knob sweep's cells alike in keys and flags."""
    cell_rows = cell_rows + cell_rows if copies else cell_rows
    cells = pd.DataFrame(
        {
            "model": pd.Series([c[0] for c in cell_rows], dtype=object),
            "images_per_s": pd.Series([c[1] for c in cell_rows], dtype=object),
            "flags": [c[2] for c in cell_rows],
            "baseline_problem": pd.Series([c[3] for c in cell_rows], dtype=object),
            "axis": "ranks",
            "axis_value": [float(c[4]) for c in cell_rows],
        },
        index=range(10, 10 + len(cell_rows)),  # not positions: the join must not assume them
    )
    frame = pd.DataFrame(
        {
            "Model": pd.Series([r[0] for r in table_rows], dtype=object),
            "Images/s": pd.Series([r[1] for r in table_rows], dtype=object),
        }
    )
    out = mark_flagged(Table("t", "T", frame), cells, MATCH)
    marks, note = expected(frame, cells, MATCH)
    flagged = cells["flags"].astype(bool).any()
    if not flagged or (marks is None and not note):
        assert out.frame.equals(frame) and out.note == ""
        return
    got = list(out.frame[FLAGS_COLUMN]) if FLAGS_COLUMN in out.frame.columns else None
    assert got == marks
    assert out.note == note


def test_nothing_to_match_on_marks_every_row_with_every_flag() -> None:
    """A table with none of the matched columns: every row gets every cell's flags, in the
    order the cells first show them, each once."""
    cells = pd.DataFrame(
        {
            "model": ["m", "m", "m"],
            "images_per_s": [1.0, 2.0, 3.0],
            "flags": ["busy", "overlap, busy", "busy"],
            "axis": "ranks",
            "axis_value": [1.0, 2.0, 4.0],
        }
    )
    frame = pd.DataFrame({"Other": ["x", "y"]})
    out = mark_flagged(Table("t", "T", frame), cells, MATCH)
    assert list(out.frame[FLAGS_COLUMN]) == ["busy, overlap", "busy, overlap"]
    assert "Left out" not in out.note
