"""The scaling metric is a value of the ground (hpcscale.model.scaling_metric): what a
campaign's tables stand on, named and headed without pandas or any higher layer."""

from __future__ import annotations

import json
import subprocess
import sys

from hpcscale.model.scaling_metric import TIME, ScalingMetric


def test_a_bundled_program_stands_on_images_per_s() -> None:
    metric = ScalingMetric()
    assert (metric.name, metric.unit, metric.kind, metric.command) == (
        "images_per_s",
        "images/s",
        "throughput",
        False,
    )
    assert metric.column == "images_per_s"
    assert metric.usual
    assert metric.heading == "Images/s"


def test_a_commands_throughput_is_headed_by_its_name_and_unit() -> None:
    metric = ScalingMetric("samples_per_s", "samples/s", command=True)
    assert metric.column == "samples_per_s"  # its own column, never images_per_s (#30)
    assert (metric.throughput_column, metric.time_column) == ("samples_per_s", "epoch_time_s")
    assert not metric.usual
    assert metric.heading == "samples_per_s (samples/s)"
    # equality ignores who measured it: campaigns on the same figure compare alike
    assert ScalingMetric(command=True) == ScalingMetric()
    assert metric != ScalingMetric("tokens_per_s", "tokens/s")


def test_a_time_metric_keeps_its_own_unit_out_of_the_heading() -> None:
    step = ScalingMetric("step_ms", "ms", TIME)
    assert step.column == "step_ms"  # its own column (#30)
    assert (step.time_column, step.throughput_column) == ("step_ms", "images_per_s")
    assert step.time_heading == "step_ms (ms)"
    assert step.heading == "step_ms"
    assert ScalingMetric("epoch_time_s", "s", TIME).heading == "Epoch time"


def test_rows_say_what_they_were_collected_on() -> None:
    rows = [
        {"figure_metric": None},
        {"figure_metric": "tokens_per_s", "figure_unit": "tokens/s", "figure_kind": "throughput"},
    ]
    assert ScalingMetric.of_rows(rows) == ScalingMetric("tokens_per_s", "tokens/s")
    assert ScalingMetric.of_rows(rows).command
    odd = [{"figure_metric": "x", "figure_unit": float("nan"), "figure_kind": "other"}]
    assert ScalingMetric.of_rows(odd) == ScalingMetric("x", "", "throughput")
    assert ScalingMetric.of_rows([{}, {"figure_metric": ""}]) == ScalingMetric()


def test_it_imports_no_pandas_and_nothing_above_the_ground() -> None:
    code = (
        "import sys, json; import hpcscale.model.scaling_metric; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(res.stdout)
    assert "hpcscale.model.scaling_metric" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("pandas", "numpy")] == []
    ours = {m for m in loaded if m.startswith("hpcscale.")}
    assert {m for m in ours if not m.startswith("hpcscale.model")} == set()
