"""A run's throughput adds up: images of its timed epochs over their total time, never the mean
of the per-epoch rates (hpcscale.collect.rates), so images_per_s x epoch_time_s is the images
of one epoch for every run.

The rule on hand numbers; then on the session's real quickstart (tests/quickstart_fixture.py:
DCGAN at 1 and 2 ranks under real mpirun), whose epochs take different times, and a copy of it
whose metrics.json lists were made to contradict each other."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcscale import api
from hpcscale.analysis.derive import derive
from hpcscale.collect.collector import collect_campaign
from hpcscale.collect.rates import throughput
from tests.quickstart_fixture import run_dir_of

# ---------------------------------------------------------------------------- the rule, by hand


def test_two_epochs_of_10_and_30_s_at_1000_images_are_50_images_per_s() -> None:
    """The issue's example: 2,000 images in 40 s. The mean of the rates 100 and 33.3 is 66.7."""
    rate = throughput([10.0, 30.0], [100.0, 1000 / 30], 1000)
    assert rate.value == 50.0 and rate.problem is None


def test_rate_times_mean_epoch_time_is_the_images_of_an_epoch() -> None:
    # 3 epochs of 800 images in 2, 4 and 4 s: 2,400 images in 10 s = 240 images/s; the mean
    # epoch is 10/3 s, and 240 x 10/3 = 800 images. (The mean of 400, 200, 200 is 266.7.)
    rate = throughput([2.0, 4.0, 4.0], [400.0, 200.0, 200.0], 800, epochs=3)
    assert rate.value == pytest.approx(240.0, rel=1e-15)
    assert rate.value * (10.0 / 3) == pytest.approx(800.0, rel=1e-12)


@pytest.mark.parametrize(
    ("times", "rates", "epochs", "said"),
    [
        ([10.0, 30.0], [100.0], None, "images_per_s 1"),  # lists of different lengths
        ([10.0, 30.0], [100.0, 1000 / 30], 3, "epochs = 3"),  # an epoch missing
        ([10.0, 0.0], [100.0, 1000 / 30], None, "epoch_time_s[1] is 0.0"),
        ([10.0, math.nan], [100.0, 1000 / 30], None, "epoch_time_s[1] is nan"),
        ([10.0, 30.0], [100.0, 50.0], None, "epoch 2: images_per_s x epoch_time_s = 1500"),
        ([], [], None, "no timed epoch"),
    ],
)
def test_lists_that_do_not_add_up_give_no_figure_and_say_why(
    times: list[float], rates: list[float], epochs: int | None, said: str
) -> None:
    rate = throughput(times, rates, 1000, epochs=epochs)
    assert math.isnan(rate.value)
    assert rate.problem is not None and said in rate.problem and "metrics.json" in rate.problem


# ---------------------------------------------------------------------------- real runs


def _metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def test_real_runs_rate_times_epoch_time_is_the_images_of_an_epoch(
    finished_quickstart: Path,
) -> None:
    """Both quickstart runs, from the table the fixture's `hpcscale collect` wrote: the images of
    an epoch are global_batch x steps_per_epoch, read from metrics.json here."""
    runs = api.load_results("quickstart", finished_quickstart).set_index("run_id")
    assert len(runs) == 2
    for run_id, row in runs.iterrows():
        m = _metrics(Path(row["run_dir"]))
        images = m["global_batch"] * m["steps_per_epoch"]
        # The epochs differ in length (else any mean would do): the rule is exercised.
        assert len(set(m["epoch_time_s"])) == len(m["epoch_time_s"]) > 1, run_id
        assert row["epoch_time_s"] == pytest.approx(sum(m["epoch_time_s"]) / m["epochs"])
        assert row["images_per_s"] * row["epoch_time_s"] == pytest.approx(images, rel=1e-9)
        total = sum(m["epoch_time_s"])
        assert row["images_per_s"] == pytest.approx(m["epochs"] * images / total, rel=1e-12)
        assert list(row["epoch_times_s"]) == m["epoch_time_s"]  # the lists as they were


def test_real_run_whose_lists_disagree_has_no_throughput(quickstart_copy) -> None:
    """A copy whose 2-rank run claims one epoch at 1.5x its images: that run's images_per_s is
    NaN, collect says why, and the analysis leaves the cell's throughput out (no fallback to
    dataset_size / epoch time for a collected run)."""
    wd = quickstart_copy()
    rd = run_dir_of(wd, 2)
    m = _metrics(rd)
    m["images_per_s"][0] *= 1.5
    (rd / "metrics.json").write_text(json.dumps(m))
    out = collect_campaign(wd / "quickstart", timeline=False, progress=False)
    rows = {r["run_id"]: r for r in out.rows}
    assert math.isnan(rows[rd.name]["images_per_s"])
    assert rows[rd.name]["epoch_time_s"] == pytest.approx(sum(m["epoch_time_s"]) / m["epochs"])
    (other,) = (r for r in out.rows if r["run_id"] != rd.name)
    assert other["images_per_s"] > 0
    said = [p.reason for p in out.problems if p.run_id == rd.name]
    assert any("epoch 1: images_per_s x epoch_time_s" in s for s in said), said
    cells = derive(api.load_results("quickstart", wd)).set_index("ranks")
    assert math.isnan(cells.loc[2, "images_per_s"]) and cells.loc[1, "images_per_s"] > 0
