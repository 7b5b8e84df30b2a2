"""Reports at the scale of real sweeps (#23): a knob sweep of a few hundred real runs is reported
by the real CLI (functional checks only: no timing), and the figures' folding rules
(`figures.fold`, the heat map's unwritten values) against values worked out by hand.

The sweep is bench/report_bench.py's campaign (layouts 1x1 and 2x1 x fusion_threshold_mb 1-25 x
cycle_time_ms 1-5 on system local: 250 runs), rendered by `hpcscale render`, each run directory
filled by the bench's own `fill` from the session's finished quickstart run with its ranks."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from bench.report_bench import NAME, campaign_text, fill, finished_runs
from hpcscale import api
from hpcscale.analysis.derive import derive
from hpcscale.report.figures.communication import UNWRITTEN, fusion_heatmap
from hpcscale.report.figures.fold import FULL_TABLE, Folded, fold_groups, note_of, spread_pick
from tests.conftest import hpcscale
from tests.unit.analysis.test_analysis import frame

RUNS = 250  # 2 layouts x 25 fusion buffers x 5 cycle times


@pytest.fixture(scope="module")
def sweep(finished_quickstart: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workdir of the rendered and filled sweep (campaign NAME), not yet collected."""
    root = tmp_path_factory.mktemp("scale")
    yaml = root / f"{NAME}.yaml"
    yaml.write_text(campaign_text(RUNS))
    wd = root / "runs"
    hpcscale("render", str(yaml), "-w", str(wd), check=True)
    real = finished_runs(finished_quickstart)
    assert fill(wd / NAME, {r: real[r] for r in (1, 2)}) == RUNS
    return wd


@pytest.mark.mpi
@pytest.mark.horovod
def test_a_sweep_of_250_runs_is_reported_whole(sweep: Path) -> None:
    proc = hpcscale("report", NAME, "-w", str(sweep), "-f", "md", "-f", "html", "-f", "csv",
                    timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = sweep / NAME / "report"
    md = (out / "index.md").read_text()
    assert (out / "index.html").stat().st_size
    # every run counted, and every run in the tidy table
    assert f"{RUNS} run(s) in {RUNS} matrix cell(s)" in md
    run_dirs = {p.name for p in (sweep / NAME / "runs").iterdir()}
    with (out / "data" / f"{NAME}-runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == RUNS and {r["run_id"] for r in rows} == run_dirs
    # 125 knob settings at two scales: lines folded, and said so with where the rest are
    assert "8 of 125 groups drawn" in md and "the other 117 are folded" in md
    assert FULL_TABLE in md
    assert "Learning curves of 6 of 125 line groups drawn" in md
    # the fusion sweep: one heat map per scale (1 and 2 ranks), never one median over both
    rep = api.report(NAME, sweep, out=sweep / "inspect").reports[0]
    (heat,) = [p for s in rep.sections for p in s.plots if p.key == "fusion"]
    titles = [ax.get_title() for ax in heat.figure.axes if ax.get_images()]
    assert len(titles) == 4  # 2 scales x (epoch time, communication-only share)
    assert sum("1 rank:" in t for t in titles) == 2 and sum("2 ranks:" in t for t in titles) == 2
    for ax in heat.figure.axes:
        for image in ax.get_images():
            assert image.get_array().shape == (5, 25)  # cycle times x fusion buffers
    # 25 x 5 cells do not hold their values at a page's width: said once, not per panel
    assert heat.caption.count(UNWRITTEN) == 1


# -- folding, by hand -------------------------------------------------------------------------

# Ten groups measured at sizes 1 and 2; efficiency at size 2 per group id.
EFFICIENCY_AT_2 = [0.50, 0.91, 0.73, 0.60, 0.99, 0.42, 0.85, 0.66, 0.77, 0.55]


def ten_groups(scores: list[float] = EFFICIENCY_AT_2) -> pd.DataFrame:
    rows = [{"group": g, "axis_value": 1, "efficiency": 1.0} for g in range(len(scores))]
    rows += [{"group": g, "axis_value": 2, "efficiency": e} for g, e in enumerate(scores)]
    return pd.DataFrame(rows)


def test_fold_groups_draws_the_best_and_worst_and_bands_the_rest() -> None:
    cells = ten_groups()
    shown, folded = fold_groups(cells, "efficiency", True, max_lines=4)
    # highest at size 2: 0.99 (group 4), 0.91 (1); lowest: 0.42 (5), 0.50 (0)
    assert sorted(set(shown["group"])) == [0, 1, 4, 5] and len(shown) == 8
    assert folded is not None and (folded.count, folded.total) == (6, 10)
    assert folded.rule == (
        "the 2 with the highest and the 2 with the lowest efficiency at their largest size"
    )
    assert sorted(set(folded.rows["group"])) == [2, 3, 6, 7, 8, 9]
    fig = Figure()
    ax = fig.add_subplot()
    folded.band(ax, "efficiency")
    (band,) = ax.collections  # the folded groups' min to max: [1, 1] at 1, [0.55, 0.85] at 2
    xy = band.get_paths()[0].vertices
    assert sorted(set(np.round(xy[xy[:, 0] == 2, 1], 9))) == [0.55, 0.85]
    assert sorted(set(np.round(xy[xy[:, 0] == 1, 1], 9))) == [1.0]
    # lower is better (e.g. epoch time): the lowest first
    shown, _ = fold_groups(cells, "efficiency", False, max_lines=4)
    assert sorted(set(shown["group"])) == [0, 1, 4, 5]
    # all fit: nothing folded
    shown, folded = fold_groups(cells[cells["group"] < 4], "efficiency", True, max_lines=4)
    assert folded is None and len(shown) == 8


def test_fold_groups_says_when_too_few_have_a_score() -> None:
    nan = float("nan")
    scores = [nan, 0.9, nan, 0.4, nan, nan, 0.7, nan, nan, nan]  # 3 scored
    shown, folded = fold_groups(ten_groups(scores), "efficiency", True, max_lines=4)
    # the three scored (1, 3, 6), then the first without a score (group 0)
    assert sorted(set(shown["group"])) == [0, 1, 3, 6]
    assert folded is not None and folded.rule == (
        "the 3 with a value of efficiency at their largest size, then the first 1 of those "
        "without one"
    )


def test_the_fold_note_says_how_many_how_chosen_and_where_the_rest_are() -> None:
    folded = Folded(pd.DataFrame(), 6, 10, "R", unit="lines", x_name="batch size")
    assert folded.note() == (
        "4 of 10 lines drawn (R); the other 6 are folded into the grey band (their minimum to "
        "maximum at each batch size); every one is in the section's table (and in "
        "`data/<campaign>-<table>.csv` with `hpcscale report -f csv`)."
    )
    assert folded.note(band=False, where="see table T") == (
        "4 of 10 lines drawn (R); the other 6 are not drawn; see table T."
    )
    assert folded.legend == "6 other lines: their range (min to max)"


def test_spread_pick_keeps_the_largest_sizes() -> None:
    """12 sizes x 3 cells, 24 bars: 8 sizes evenly spaced from the first to the last
    (linspace(0, 11, 8) rounds to positions 0 2 3 5 6 8 9 11: sizes 1 3 4 6 7 9 10 12), each
    with its 3 cells; never sizes 1-8 only, which a note saying "at each size" would hide."""
    rows = pd.DataFrame(
        [{"axis_value": s, "epoch_time_s": s + d} for s in range(1, 13) for d in (0.3, 0.1, 0.2)]
    )
    out, note = spread_pick(rows, "epoch_time_s", name="epoch time")
    assert len(out) == 24
    assert sorted(set(out["axis_value"])) == [1, 3, 4, 6, 7, 9, 10, 12]
    assert list(out.index) == sorted(out.index)  # in the rows' own order
    assert note == (
        "24 of 36 cells drawn: at 8 of 12 sizes (evenly spaced from the smallest to the largest) "
        f"the lowest, median and highest epoch time; {FULL_TABLE}."
    )


def test_spread_pick_takes_lowest_median_highest_by_position() -> None:
    values = [7, 0, 29, 14, *[v for v in range(30) if v not in (7, 0, 29, 14)]]
    rows = pd.DataFrame({"axis_value": 1, "epoch_time_s": [float(v) for v in values]})
    out, note = spread_pick(rows, "epoch_time_s")
    # 30 values 0..29: the lowest 0, the median (n - 1) // 2 = 14th of the sorted, the highest 29
    assert out["epoch_time_s"].tolist() == [0.0, 29.0, 14.0]  # in the rows' order
    assert note.startswith("3 of 30 cells drawn: at each size the lowest, median and highest ")
    # a repeated index label picks one row per pick, not every row with that label
    same = pd.DataFrame({"axis_value": 1, "epoch_time_s": [5.0, 1.0, 4.0, 2.0, 3.0]}, index=[7] * 5)
    out, _ = spread_pick(same, "epoch_time_s", limit=3)
    assert out["epoch_time_s"].tolist() == [5.0, 1.0, 3.0]
    # fits: all rows, no note
    out, note = spread_pick(same, "epoch_time_s", limit=5)
    assert len(out) == 5 and note == ""


def fusion_runs(buffers: int, cycles: int) -> pd.DataFrame:
    rows = [
        {
            "fusion_threshold_mb": float(b),
            "cycle_time_ms": float(c),
            "epoch_time_s": 90.0 + 0.5 * b + 0.1 * c,
            "wait_for_data_s": 0.7,
            "wait_for_other_tensor_data_s": 0.09,
            "comm_s": 10.0,
        }
        for b in range(1, buffers + 1)
        for c in range(1, cycles + 1)
    ]
    return frame(rows, model="dcgan", scaling="none", device="gpu", nodes=2, batch_per_rank=32)


def test_heat_map_writes_values_that_fit_and_says_when_they_do_not() -> None:
    # 3 buffers x 5 cycle times: each cell ~0.85 in wide, its value ("91.6") ~0.23 in: written
    fig = fusion_heatmap(derive(fusion_runs(3, 5)))
    assert fig is not None and note_of(fig) == ""
    epoch = fig.axes[0]
    assert len(epoch.texts) == 15
    assert epoch.texts[0].get_text() == f"{90.0 + 0.5 + 0.1:.3g}" == "90.6"
    # 25 buffers x 20 cycle times at the same width: ~0.12 in a cell, nothing written, said once
    fig = fusion_heatmap(derive(fusion_runs(25, 20)))
    assert fig is not None
    assert all(not ax.texts for ax in fig.axes)
    assert note_of(fig) == UNWRITTEN
