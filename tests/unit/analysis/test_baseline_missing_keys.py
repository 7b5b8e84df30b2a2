"""A group whose shared key is missing (a workload argument some cells leave unset) finds its
planned baseline like any other group (#28: the keys that join planned runs with measured cells
are built a value at a time; before, `Series.map` turned the None a missing value stands for
back into NaN, NaN never equals NaN, and such a group silently took its next cell up as the
baseline). Expected values worked out by hand from the frames below."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hpcscale.analysis.baseline import SHARED, with_baseline

# every field a group shares, one value for all cells (only the argument differs below)
FIELDS = {f: "same" for f in SHARED}


def test_planned_baseline_found_when_a_group_key_is_missing() -> None:
    """Planned: ranks 1, 2, 4 with args.image_size unset (NaN) in every run; ranks 1 (run r1)
    has no result, so the measured cells are ranks 2 and 4. The baseline stays at ranks 1: no
    baseline metrics, scale 2 and 4, and the problem names r1."""
    common = {**FIELDS, "scaling": "weak", "nodes": 1, "batch_per_rank": 16}
    agg = pd.DataFrame(
        [
            {**common, "ranks": 2, "args.image_size": math.nan, "epoch_time_s": 10.0},
            {**common, "ranks": 4, "args.image_size": math.nan, "epoch_time_s": 11.0},
        ]
    )
    planned = pd.DataFrame(
        [{**common, "ranks": r, "args.image_size": math.nan, "run_id": f"r{r}"} for r in (1, 2, 4)]
    )
    out = with_baseline(agg, "ranks", metrics=("epoch_time_s",), planned=planned)
    assert out["base_axis_value"].tolist() == [1, 1]
    assert out["scale"].tolist() == [2.0, 4.0]
    assert out["base_epoch_time_s"].isna().all()
    assert (
        out["baseline_problem"].tolist()
        == ["its baseline, ranks=1, has no valid result (run r1)"] * 2
    )


def test_groups_apart_by_a_missing_and_a_set_value() -> None:
    """Missing and set are two groups: the set one's planned baseline (ranks 1, r1b) is not the
    missing one's (none planned below its ranks 2 cell, which is its own baseline)."""
    common = {**FIELDS, "scaling": "weak", "nodes": 1, "batch_per_rank": 16}
    agg = pd.DataFrame(
        [
            {**common, "ranks": 2, "args.image_size": math.nan, "epoch_time_s": 10.0},
            {**common, "ranks": 2, "args.image_size": 32.0, "epoch_time_s": 12.0},
        ]
    )
    planned = pd.DataFrame(
        [
            {**common, "ranks": 2, "args.image_size": math.nan, "run_id": "r2a"},
            {**common, "ranks": 1, "args.image_size": 32.0, "run_id": "r1b"},
            {**common, "ranks": 2, "args.image_size": 32.0, "run_id": "r2b"},
        ]
    )
    out = with_baseline(agg, "ranks", metrics=("epoch_time_s",), planned=planned)
    assert out["base_axis_value"].tolist() == [2, 1]
    assert out["base_epoch_time_s"].tolist()[0] == 10.0
    assert math.isnan(out["base_epoch_time_s"].tolist()[1])
    first, second = out["baseline_problem"].tolist()
    assert not isinstance(first, str)  # no problem (missing, as for every group without one)
    assert second == "its baseline, ranks=1, has no valid result (run r1b)"


def test_missing_key_among_set_ones_finds_its_planned_baseline() -> None:
    """The argument set in one group and missing in the other, both with a failed ranks 1
    run: each group keeps ranks 1 as its baseline, and each problem names its own run."""
    common = {**FIELDS, "scaling": "weak", "nodes": 1, "batch_per_rank": 16}
    agg = pd.DataFrame(
        [
            {**common, "ranks": 2, "args.image_size": math.nan, "epoch_time_s": 10.0},
            {**common, "ranks": 2, "args.image_size": 32.0, "epoch_time_s": 12.0},
        ]
    )
    planned = pd.DataFrame(
        [
            {**common, "ranks": 1, "args.image_size": math.nan, "run_id": "r1a"},
            {**common, "ranks": 2, "args.image_size": math.nan, "run_id": "r2a"},
            {**common, "ranks": 1, "args.image_size": 32.0, "run_id": "r1b"},
            {**common, "ranks": 2, "args.image_size": 32.0, "run_id": "r2b"},
        ]
    )
    out = with_baseline(agg, "ranks", metrics=("epoch_time_s",), planned=planned)
    assert out["base_axis_value"].tolist() == [1, 1]
    assert out["base_epoch_time_s"].isna().all()
    assert out["baseline_problem"].tolist() == [
        "its baseline, ranks=1, has no valid result (run r1a)",
        "its baseline, ranks=1, has no valid result (run r1b)",
    ]


def test_plain_values_of_a_key() -> None:
    """Missing as None, numpy scalars as Python ones, the rest as they are (worked by hand)."""
    from hpcscale.analysis.baseline import _plain

    assert _plain(None) is None and _plain(math.nan) is None
    assert _plain(np.float64("nan")) is None
    assert _plain(np.int64(3)) == 3 and type(_plain(np.int64(3))) is int
    assert type(_plain(np.float64(2.5))) is float and _plain(np.float64(2.5)) == 2.5
    assert _plain("a") == "a" and _plain(2.0) == 2.0 and _plain(True) is True
    assert _plain(0) == 0 and _plain(0.0) == 0.0 and _plain("") == ""
