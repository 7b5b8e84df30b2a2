"""Issue 28 (a report of 1,000 overlapping runs under 5 s): a report computes what it asks of
its run table once (analysis.memo), never from a table that changed since, and the tables it
formats come out as they did when every cell was formatted on its own. Timings are in
bench/report_bench.py (no timed asserts here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpcscale.analysis import frame as frame_mod
from hpcscale.analysis.frame import normalise
from hpcscale.analysis.memo import FrameMemo
from hpcscale.report import fmt
from hpcscale.report.sections import campaign_report
from tests.unit.analysis.test_analysis import seed000_frame


def test_a_report_normalises_its_run_table_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every section normalised the same run table again (13 times per report at 1,000 runs);
    now the table is normalised once, and each section gets its own copy."""
    calls: list[int] = []
    real = frame_mod._normalise

    def counted(df: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(df))
        return real(df)

    monkeypatch.setattr(frame_mod, "_normalise", counted)
    frame_mod._NORMALISED.clear()
    runs = seed000_frame()
    rep = campaign_report(runs, "seed000")
    assert rep.sections  # a real report was built
    # the run table (8 rows) once; a normalised copy handed to a check may be normalised again
    assert calls.count(len(runs)) <= 2, calls
    assert len(calls) <= 3, calls


def test_normalise_recomputes_a_changed_table_and_hands_out_copies() -> None:
    runs = seed000_frame()
    first = normalise(runs)
    assert list(first["nodes"]) == [1] * 8
    first.loc[0, "nodes"] = 99  # a caller changing its copy changes no one else's
    assert list(normalise(runs)["nodes"]) == [1] * 8
    runs.loc[3, "nodes"] = 2  # the table itself changed: computed again, not remembered
    again = normalise(runs)
    assert list(again["nodes"]) == [1, 1, 1, 2, 1, 1, 1, 1]
    assert list(again["ranks"]) == [1, 1, 1, 2, 1, 1, 1, 1]  # nodes x tasks_per_node (1)
    runs["epoch_time_s"] = runs["epoch_time_s"] * 2  # a column replaced
    assert normalise(runs)["epoch_time_s"].iloc[0] == 460.0  # 230 s x 2


def test_memo_by_value_and_by_identity() -> None:
    seen: list[str] = []
    memo: FrameMemo[list[str]] = FrameMemo(list)
    by_value: FrameMemo[list[str]] = FrameMemo(list, by_value=True)
    a = pd.DataFrame({"x": [1.0, np.nan], "y": ["p", None]})
    b = a.copy()
    for m in (memo, by_value):
        m.get(a, "k", lambda: seen.append("a") or ["a"])
        m.get(b, "k", lambda: seen.append("b") or ["b"])  # equal, another object
        m.get(a, "other key", lambda: seen.append("k2") or ["k2"])
    # identity: b is computed; by value: b equals a (NaN equal to NaN, None to None)
    assert seen == ["a", "b", "k2", "a", "k2"]
    got = memo.get(a, "k", lambda: ["never"])
    got.append("changed")  # a copy: the memo keeps its own
    assert memo.get(a, "k", lambda: ["never"]) == ["a"]


def test_display_formats_each_column_as_cell_by_cell() -> None:
    """`display` formats a float column and repeated values per column at once; what it shows
    is what `cell` shows of each value (True and 1 apart, NaN and None as dashes)."""
    frame = pd.DataFrame(
        {
            "f": [1.0, 2.5, np.nan, 12345.6, 0.0123, float("inf"), -3.0],
            "o": [True, 1, 1.0, None, np.nan, "x|y", False],
            "s": ["a", "a", "b", "a", "b", "a", "<b>"],
            "i": [1, 1, 20000, 1, 20000, 3, 1],
            "l": [[1], [1], [2], None, [3], [1], [2]],
        }
    )
    shown = fmt.display(frame)
    expected = {
        "f": ["1", "2.50", "–", "12,346", "0.0123", "∞", "-3"],
        "o": ["yes", "1", "1", "–", "–", "x|y", "no"],
        "s": ["a", "a", "b", "a", "b", "a", "<b>"],
        "i": ["1", "1", "20,000", "1", "20,000", "3", "1"],
        "l": ["[1]", "[1]", "[2]", "–", "[3]", "[1]", "[2]"],
    }
    assert {c: list(shown[c]) for c in shown.columns} == expected
    assert list(shown.index) == list(range(7))
