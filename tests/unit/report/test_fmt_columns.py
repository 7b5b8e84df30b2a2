"""A table's columns formatted a column at a time (#28: `fmt._real` per value was most of a
1,000-run report's table formatting) give the strings the per-value rule gives; the expected
strings are written out by hand from the rule in fmt.cell's docstring."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hpcscale.report.fmt import _real, _reals, display

# value -> what the rule says: missing as an en dash, infinities as ∞, whole numbers plain
# (thousands separated from 10 000), else 0 decimals from 10 000, 1 from 100, 2 from 1, and 3
# significant digits below 1
BY_HAND = [
    (math.nan, "–"),
    (math.inf, "∞"),
    (-math.inf, "-∞"),
    (-0.0, "0"),
    (0.0, "0"),
    (9999.0, "9999"),
    (12345.0, "12,345"),
    (-12345.0, "-12,345"),
    (1e15, "1,000,000,000,000,000"),  # too large to be shown as an integer: ,.0f
    (1e20, "100,000,000,000,000,000,000"),
    (12345.6, "12,346"),
    (123.7, "123.7"),
    (-2.5, "-2.50"),
    (12.25, "12.25"),
    (0.5, "0.5"),
    (0.000123456, "0.000123"),
    (1.5e-7, "1.5e-07"),
]


def test_a_float_column_is_formatted_as_each_value_by_hand() -> None:
    values = np.array([v for v, _ in BY_HAND])
    assert _reals(values) == [s for _, s in BY_HAND]
    assert [_real(float(v)) for v in values] == [s for _, s in BY_HAND]


def test_columns_of_one_case_and_empty_columns() -> None:
    assert _reals(np.array([1.5, 2.5])) == ["1.50", "2.50"]
    assert _reals(np.array([3.0, 40000.0])) == ["3", "40,000"]
    assert _reals(np.array([math.nan, math.nan])) == ["–", "–"]
    assert _reals(np.array([], dtype=float)) == []


def test_the_column_and_the_value_rule_agree_on_random_magnitudes() -> None:
    rng = np.random.default_rng(28)
    values = rng.normal(0, 1, 5000) * 10.0 ** rng.integers(-12, 22, 5000)
    values = np.concatenate([values, np.round(values[:2500]), [math.nan, math.inf, -0.0]])
    assert _reals(values) == [_real(float(v)) for v in values]


def test_display_formats_int_str_and_float_columns() -> None:
    frame = pd.DataFrame(
        {
            "n": [5, 12345, -10000],
            "name": ["a", "b|c", "a"],
            "x": [0.5, math.nan, 1234.5],
        }
    )
    shown = display(frame)
    assert shown["n"].tolist() == ["5", "12,345", "-10,000"]
    assert shown["name"].tolist() == ["a", "b|c", "a"]
    assert shown["x"].tolist() == ["0.5", "–", "1234.5"]
