"""`with_setting` matches rows to cells with missing values equal to each other; its test for
missing takes the common types first (#28: `pd.isna` per value was a tenth of its time at 1,000
cells). Which values are missing, worked out by hand: None, NaN of any float type, pd.NA and
NaT; not 0, False, "", "nan", a number, a list or an array."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hpcscale.report.labels import _key, _missing


@pytest.mark.parametrize(
    "value",
    [None, math.nan, float("nan"), np.nan, np.float64("nan"), np.float32("nan"), pd.NA, pd.NaT],
)
def test_missing(value: object) -> None:
    assert _missing(value) is True


@pytest.mark.parametrize(
    "value",
    [0, 0.0, False, True, "", "nan", "None", 1.5, np.int64(3), np.float64(2.0), [1], (None,)],
)
def test_not_missing(value: object) -> None:
    assert _missing(value) is False


def test_array_is_not_missing() -> None:
    assert _missing(np.array([1.0, math.nan])) is False  # list-like: never a missing value


def test_key_missing_values_alike_and_numbers_by_equality() -> None:
    assert _key([None, 1, "a"]) == _key([math.nan, 1.0, "a"]) == _key([pd.NA, True, "a"])
    assert _key([None]) != _key(["None"])
    assert _key([2]) != _key([2.5])
