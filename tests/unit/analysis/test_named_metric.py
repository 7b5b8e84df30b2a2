"""Analysis keys on the campaign's named scaling metric (#30): a command's `samples_per_s` or
`time:` metric is its own column, never a relabelled images_per_s; speedup, efficiency and the
table's heading come from it. Expected values are hand arithmetic on the rows below."""

from __future__ import annotations

import importlib.util
import json
import math

import pandas as pd
import pytest

from hpcscale.analysis import tables
from hpcscale.analysis.derive import derive
from hpcscale.model.scaling_metric import TIME, ScalingMetric

SAMPLES = ScalingMetric("samples_per_s", "samples/s", command=True)


def _runs(scaling: str, column: str, values: dict[int, float]) -> pd.DataFrame:
    """One command run per rank count, with the figure only in `column` (no images_per_s)."""
    rows = []
    for ranks, value in values.items():
        rows.append(
            {
                "run_id": f"r{ranks}",
                "campaign": "c",
                "model": "prog",
                "scaling": scaling,
                "device": "cpu",
                "nodes": 1,
                "tasks_per_node": ranks,
                "ranks": ranks,
                "batch_per_rank": 4,
                "global_batch": 4 * ranks if scaling == "weak" else 8,
                "command": "python prog.py",
                column: value,
                "figure_metric": column,
                "figure_kind": TIME if column in ("elapsed", "step_ms") else "throughput",
                "metric_units": json.dumps({column: "x"}),
            }
        )
    return pd.DataFrame(rows)


def test_speedup_and_efficiency_stand_on_the_commands_own_throughput() -> None:
    runs = _runs("weak", "samples_per_s", {1: 25.0, 2: 45.0, 4: 80.0})
    assert "images_per_s" not in runs.columns
    cells = derive(runs, axis="ranks", metric=SAMPLES).set_index("ranks")
    assert list(cells["samples_per_s"]) == [25.0, 45.0, 80.0]
    assert list(cells["base_samples_per_s"]) == [25.0, 25.0, 25.0]
    assert cells.loc[2, "speedup"] == pytest.approx(45.0 / 25.0)
    assert cells.loc[4, "efficiency"] == pytest.approx(80.0 / (4 * 25.0))
    assert cells["images_per_s"].isna().all()  # nothing was copied into it
    table = tables.scaling_table(cells.reset_index(), SAMPLES)
    assert "samples_per_s (samples/s)" in table.columns and "Images/s" not in table.columns
    assert list(table["samples_per_s (samples/s)"]) == [25.0, 45.0, 80.0]


def test_a_time_metric_is_strong_scaling_time_under_its_own_name() -> None:
    elapsed = ScalingMetric("elapsed", "s", TIME, command=True)
    runs = _runs("strong", "elapsed", {1: 13.0, 2: 7.0})
    cells = derive(runs, axis="ranks", metric=elapsed).set_index("ranks")
    assert cells.loc[2, "speedup"] == pytest.approx(13.0 / 7.0)
    assert cells.loc[2, "efficiency"] == pytest.approx(13.0 / (2 * 7.0))
    assert math.isnan(cells.loc[2, "epoch_time_s"])  # the metric stays in its own column
    assert "elapsed (s)" in tables.scaling_table(cells.reset_index(), elapsed).columns


def test_a_bundled_metric_is_images_per_s_by_default() -> None:
    runs = _runs("weak", "images_per_s", {1: 100.0, 2: 150.0})
    runs["command"] = None
    cells = derive(runs, axis="ranks").set_index("ranks")
    assert cells.loc[2, "speedup"] == pytest.approx(1.5)
    assert "Images/s" in tables.scaling_table(cells.reset_index()).columns


def test_figures_are_drawn_with_the_metrics_own_labels_and_nothing_relabels_them() -> None:
    """The axis says the metric's name and unit from the start (a `time:` metric in the unit
    its extractor declares, never converted to seconds); the module that rewrote finished
    tables and figures by string replacement is gone."""
    from hpcscale.report import figures

    runs = _runs("weak", "samples_per_s", {1: 25.0, 2: 45.0})
    cells = derive(runs, axis="ranks", metric=SAMPLES)
    fig = figures.throughput(cells, "samples_per_s", SAMPLES)
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()] == ["samples_per_s (samples/s)"]
    step = ScalingMetric("step_ms", "ms", TIME, command=True)
    timed = derive(_runs("strong", "step_ms", {1: 40.0, 2: 22.0}), axis="ranks", metric=step)
    fig = figures.throughput(timed, "step_ms", step)
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()] == ["step_ms (ms)"]
    assert importlib.util.find_spec("hpcscale.report.metric_labels") is None


def test_a_metric_named_by_its_column_keeps_its_kind() -> None:
    """A notebook's `derive(df, metric="step_ms")`: the rows say step_ms is a time, so strong
    speedup is T1/TN = 40/22, not the rate's XN/X1 = 0.55; a hand table without them says it
    by the name (`_ms`)."""
    runs = _runs("strong", "step_ms", {1: 40.0, 2: 22.0})
    cells = derive(runs, axis="ranks", metric="step_ms").set_index("ranks")
    assert cells.loc[2, "speedup"] == pytest.approx(40.0 / 22.0)
    bare = runs.drop(columns=["figure_metric", "figure_kind", "command"])
    cells = derive(bare, axis="ranks", metric="step_ms").set_index("ranks")
    assert cells.loc[2, "speedup"] == pytest.approx(40.0 / 22.0)
    # a name that says nothing of its kind: only the rows do
    elapsed = _runs("strong", "elapsed", {1: 40.0, 2: 22.0})
    cells = derive(elapsed, axis="ranks", metric="elapsed").set_index("ranks")
    assert cells.loc[2, "speedup"] == pytest.approx(40.0 / 22.0)
