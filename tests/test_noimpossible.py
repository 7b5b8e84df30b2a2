"""Issue 13, "no impossible figures" and "the noise shown": extrapolations that refuse to predict
what their data cannot support (and are never negative), names that match the arithmetic, time
to target with a stated target and source, and confidence intervals over repeats.

Pure maths first (unit and hypothesis tests), then the real quickstart (copied, its metrics
edited where said), then a tiny real campaign with `repeats: 3`."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcscale.analysis import tables
from hpcscale.analysis.extrapolate import comm_cost, extrapolate, refusals
from hpcscale.analysis.intervals import (
    bootstrap_median,
    bootstrap_ratio,
    overlaps,
    verdict,
    with_intervals,
)
from hpcscale.analysis.models import fit_amdahl, fit_gustafson, fit_problem
from hpcscale.analysis.targets import campaign_targets, parse_target
from hpcscale.report.sections.noise import NO_INTERVAL, comparisons
from tests.conftest import hpcscale
from tests.quickstart_fixture import run_dir_of


def frame(rows: list[dict[str, Any]], **common: Any) -> pd.DataFrame:
    return pd.DataFrame([{**common, **r} for r in rows])


# -- extrapolation: physical, over-determined fits only ------------------------------------------


def test_fit_problem_names_too_few_points_and_unphysical_fits() -> None:
    two = fit_gustafson([1, 2], [114.3, 98.07])  # the quickstart: slower with scale
    assert "2 measurement(s) for a 2-parameter law" in (fit_problem(two) or "")
    superlinear = fit_amdahl([1, 2, 4], [10.0, 4.0, 1.5])
    assert "outside 0..1" in (fit_problem(superlinear) or "")
    ok = fit_amdahl([1, 2, 4], [10.0, 5.6, 3.4])
    assert fit_problem(ok) is None and 0 <= ok.serial_fraction <= 1


def quickstart_like(images_per_s: list[float], ranks: list[int]) -> pd.DataFrame:
    rows = [
        {"tasks_per_node": r, "images_per_s": x, "epoch_time_s": 32 * r / x, "run_id": f"r{i}"}
        for i, (r, x) in enumerate(zip(ranks, images_per_s, strict=True))
    ]
    return frame(rows, model="dcgan", scaling="weak", device="cpu", nodes=1, batch_per_rank=16)


def test_two_points_predict_nothing_and_say_why() -> None:
    """The quickstart printed -63.8 images/s at 8 ranks and a "95% interval" from two points."""
    runs = quickstart_like([114.3, 98.07], [1, 2])
    assert extrapolate(runs, axis="ranks", at=(8, 16, 32)).empty
    why = refusals(runs, axis="ranks")
    assert len(why) == 1 and "at least 3 are needed" in why["reason"].iloc[0]


def test_predictions_beyond_max_nodes_are_marked_in_the_axis_unit() -> None:
    runs = quickstart_like([100.0, 190.0, 350.0], [1, 2, 4])  # 1 node, up to 4 ranks on it
    pred = extrapolate(runs, axis="ranks", at=(4, 8), max_nodes=1)
    assert pred["beyond_system"].tolist() == [False, True]  # 1 node x 4 ranks per node
    assert pred["interval"].str.contains("prediction interval \\(Student t").all()
    assert pred["label"].iloc[1].endswith("beyond the system's max_nodes")
    assert extrapolate(runs, axis="ranks", at=(8,))["beyond_system"].tolist() == [False]
    cost = comm_cost(runs.assign(param_count=1e6), axis="ranks", at=(8,), max_nodes=1)
    assert cost.set_index("axis_value")["beyond_system"].to_dict() == {
        1.0: False,
        2.0: False,
        4.0: False,
        8.0: True,
    }
    table = tables.predictions_table(pred)
    assert table["Beyond system"].tolist() == ["", "beyond max_nodes"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.05, 1e4), min_size=3, max_size=8),
    st.sampled_from(["weak", "strong"]),
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=3, max_size=8),
)
def test_no_prediction_is_ever_negative(values: list[float], scaling: str, ns: list[int]) -> None:
    n = min(len(values), len(ns))
    rows = [
        {"nodes": ns[i], "epoch_time_s": values[i], "images_per_s": values[i], "run_id": f"r{i}"}
        for i in range(n)
    ]
    runs = frame(rows, model="m", scaling=scaling, device="cpu", batch_per_rank=8, global_batch=64)
    runs["repeat"] = runs.groupby("nodes").cumcount()
    pred = extrapolate(runs, axis="nodes", at=(16, 32, 64))
    if len(pred):
        assert (pred["predicted"] > 0).all()
        assert (pred["lower"].dropna() >= 0).all()
        assert ((pred["serial_fraction"] >= 0) & (pred["serial_fraction"] <= 1)).all()


# -- confidence intervals and "within noise" ----------------------------------------------------


def test_bootstrap_intervals() -> None:
    assert np.isnan(bootstrap_median([3.0])).all()
    lo, hi = bootstrap_median([1.0, 2.0, 3.0, 4.0, 100.0])
    assert 1.0 <= lo <= 3.0 <= hi <= 100.0
    assert bootstrap_median([1.0, 2.0, 3.0]) == bootstrap_median([1.0, 2.0, 3.0])  # seeded
    lo, hi = bootstrap_ratio([10.0, 10.2, 9.9], [5.0, 5.1, 4.9])
    assert lo < 2.0 < hi and hi - lo < 0.2
    assert np.isnan(bootstrap_ratio([10.0], [5.0, 5.1])).all()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0.001, 1e6), min_size=2, max_size=12))
def test_bootstrap_median_lies_within_the_samples(xs: list[float]) -> None:
    lo, hi = bootstrap_median(xs, n=300)
    assert min(xs) <= lo <= hi <= max(xs)


def test_overlap_and_verdict() -> None:
    assert overlaps((1, 2), (2, 3)) is True
    assert overlaps((1, 2), (2.1, 3)) is False
    assert overlaps((1, np.nan), (2, 3)) is None
    assert verdict(10, (9, 11), 5, (4, 6), higher_is_better=True) == "faster"
    assert verdict(10, (9, 11), 10.5, (10, 12), higher_is_better=True) == "within noise"
    assert verdict(10, (np.nan, np.nan), 5, (4, 6), higher_is_better=True) == "no interval"


def two_flavours(times: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        {"mpi": mpi, "repeat": i, "epoch_time_s": t, "run_id": f"{mpi}{i}"}
        for mpi, ts in times.items()
        for i, t in enumerate(ts)
    ]
    return frame(
        rows, model="dcgan", scaling="none", device="cpu", nodes=1, batch_per_rank=16,
        dataset_size=1600,
    )  # fmt: skip


def cells_of(runs: pd.DataFrame) -> pd.DataFrame:
    from hpcscale.analysis.derive import derive

    return derive(runs)


def test_comparisons_call_a_cell_faster_only_outside_the_noise() -> None:
    apart = comparisons(
        cells_of(two_flavours({"gloo": [10.0, 10.2, 9.9], "openmpi": [20, 21, 19]}))
    )
    assert apart["Verdict"].tolist() == ["Horovod (gloo) faster than Horovod (openmpi)"]
    close = comparisons(cells_of(two_flavours({"gloo": [10.0, 12.0, 9.0], "openmpi": [11, 13, 8]})))
    assert close["Verdict"].tolist() == ["within noise (intervals overlap)"]
    once = comparisons(cells_of(two_flavours({"gloo": [10.0], "openmpi": [20.0]})))
    assert once["Verdict"].tolist() == [NO_INTERVAL]


def test_speedup_interval_resamples_the_baseline_too() -> None:
    runs = quickstart_like([100, 104, 96, 150, 160, 140], [1, 1, 1, 2, 2, 2])
    runs["repeat"] = [0, 1, 2, 0, 1, 2]
    cells = cells_of(runs)
    top = cells.set_index("ranks").loc[2]
    assert top["speedup_lo"] < top["speedup"] < top["speedup_hi"]
    assert top["efficiency_hi"] == pytest.approx(top["speedup_hi"] / 2)
    assert np.isnan(cells.set_index("ranks").loc[1, "speedup_lo"])  # 1 by definition
    again = with_intervals(cells.drop(columns=["speedup_lo"]), runs)
    assert again["speedup_lo"].iloc[1] == top["speedup_lo"]


# -- time to target ------------------------------------------------------------------------------


def test_parse_target() -> None:
    spec = parse_target(" g_loss <= 1.2 ", "cli")
    assert (spec.metric, spec.op, spec.value, spec.goal, spec.source) == (
        "g_loss",
        "<=",
        1.2,
        "min",
        "cli",
    )
    assert parse_target("val_accuracy>=0.8").goal == "max"
    for bad in ("g_loss=1.2", "g_loss<1", "<=1", "g_loss<=x", "1<=g_loss"):
        with pytest.raises(ValueError, match="METRIC<=VALUE"):
            parse_target(bad)


def test_classifiers_default_to_the_plateau_gans_to_nothing() -> None:
    rows = [
        {"model_family": "cnn", "val_accuracy": [0.4, 0.6, 0.7, 0.705, 0.7], "run_id": "c"},
        {"model_family": "gan", "losses": {"d_loss": [1.0, 0.5]}, "run_id": "g"},
    ]
    runs = frame(
        rows, model="m", scaling="none", device="cpu", nodes=1, epoch_time_s=2.0, batch_per_rank=8
    )
    found = campaign_targets(runs)
    assert found.default == "val_accuracy plateau" and found.unset == ("gan",)
    assert found.cells["plateau_epoch"].tolist() == [3.0]
    given_ = campaign_targets(runs, [parse_target("val_accuracy>=0.6", "cli")])
    assert given_.per_run.set_index("run_id")["epochs_to_target"].to_dict()["c"] == 2


# -- the real quickstart -------------------------------------------------------------------------


def report_md(wd: Path, *extra: str) -> tuple[Any, str]:
    res = hpcscale("report", "quickstart", "-w", str(wd), *extra, timeout=600)
    md = wd / "quickstart" / "report" / "index.md"
    return res, md.read_text() if md.exists() else ""


def section(md: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    assert m, f"no section {title!r}"
    return m.group(1)


def test_quickstart_report_has_no_impossible_figures(
    quickstart_copy: Callable[[], Path],
) -> None:
    wd = quickstart_copy()
    res, md = report_md(wd)
    assert res.returncode == 0, res.stderr
    ext = section(md, "Extrapolation (predictions)")
    assert "No prediction for" in ext and "at least 3 are needed" in ext
    assert "95% interval" not in md and "**Extrapolated (prediction)**" not in ext
    # The communication-cost rows past 1 node x 2 ranks per node are marked.
    cost_rows = [ln for ln in ext.splitlines() if ln.startswith("| dcgan")]
    beyond = {int(ln.split("|")[2]) for ln in cost_rows if "beyond max_nodes" in ln}
    assert beyond == {4, 8, 16, 32}
    # No negative figure anywhere in a table of the report.
    for line in md.splitlines():
        if line.startswith("|"):
            assert not re.search(r"\|\s*-\d", line), line
    # Names that match the arithmetic: the seed's overhead and the measured share side by side.
    eff = section(md, "Scaling efficiency and communication overhead")
    assert tables.OVERHEAD_LABEL in eff and tables.COMM_SHARE_LABEL in eff
    row2 = next(ln for ln in eff.splitlines() if re.match(r"\| dcgan .*\| 2 ", ln))
    loss, share = (float(v) for v in row2.split("|")[4:6])
    results = pd.read_parquet(wd / "quickstart" / "results.parquet").set_index("ranks")
    measured = 100 * results.loc[2, "comm_s"] / results.loc[2, "epoch_time_s"]
    assert share == pytest.approx(measured, abs=0.01) and loss > share
    overlap = section(md, "Compute / communication overlap")
    assert "Communication inside a step (exact)" in overlap and "Exact overlap" not in overlap
    # No default target for a GAN: no table, and the section says how to set one.
    ttt = section(md, "Time to target")
    assert "No default target for workload kind(s) gan" in ttt and "--target" in ttt
    assert "|" not in ttt


def test_quickstart_time_to_target_from_the_command_line_and_the_campaign(
    quickstart_copy: Callable[[], Path],
) -> None:
    wd = quickstart_copy()
    g = [json.loads((run_dir_of(wd, r) / "metrics.json").read_text()) for r in (1, 2)]
    reached = max(min(m["losses"]["g_loss"]) for m in g)  # every run reaches it
    target = f"g_loss<={reached:.6g}"
    res, md = report_md(wd, "--target", target, "--target", "d_loss<=100")
    assert res.returncode == 0, res.stderr
    ttt = section(md, "Time to target")
    assert f"Target: g_loss <= {reached:.6g} (source: command line (--target))" in ttt
    rows = [ln for ln in ttt.splitlines() if ln.startswith("| g_loss")]
    assert len(rows) == 2 and len([ln for ln in ttt.splitlines() if "| d_loss" in ln]) == 2
    bad = hpcscale("report", "quickstart", "-w", str(wd), "--target", "g_loss=1.2")
    assert bad.returncode == 2 and "--target" in bad.stderr and "METRIC<=VALUE" in bad.stderr
    # The campaign's own `targets:` with its file and line as the source.
    copy = wd / "quickstart" / "campaign.yaml"
    copy.write_text(copy.read_text() + f"targets:\n  - 'g_loss<={reached:.6g}'\n")
    line = len(copy.read_text().splitlines())
    res, md = report_md(wd)
    assert res.returncode == 0, res.stderr
    assert f"(source: campaign file {copy}:{line})" in section(md, "Time to target")


def test_quickstart_as_a_classifier_defaults_to_the_plateau(
    quickstart_copy: Callable[[], Path],
) -> None:
    """Metrics edited to a classifier's: per-epoch validation accuracy, workload 'cnn'."""
    wd = quickstart_copy()
    for r in (1, 2):
        path = run_dir_of(wd, r) / "metrics.json"
        m = json.loads(path.read_text())
        t = m["epoch_time_s"]
        m.update(
            workload="cnn",
            epochs=5,
            epoch_time_s=[*t, *t, t[0]],
            val_accuracy=[0.40, 0.62, 0.70, 0.705, 0.70],
        )
        path.write_text(json.dumps(m))
    res, md = report_md(wd)
    assert res.returncode == 0, res.stderr
    ttt = section(md, "Time to target")
    assert "source: default for classifiers" in ttt
    assert "first epoch opening 3 consecutive epochs all within 0.01" in ttt
    header = next(ln for ln in ttt.splitlines() if ln.startswith("| Target"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    rows = [ln for ln in ttt.splitlines() if ln.startswith("| val_accuracy plateau")]
    assert len(rows) == 2
    for row in rows:
        cells = dict(zip(cols, (c.strip() for c in row.strip("|").split("|")), strict=True))
        assert cells["Plateau epoch"] == "3"


# -- a tiny real campaign with repeats ----------------------------------------------------------

NOISE = """\
name: noise3
workload:
  model: dcgan
  epochs: 1
  args: {image_size: 16, dataset_size: 128}
system: local
scaling: weak
repeats: 3
matrix:
  layout: ["1x1", "2x1"]
  batch: 16
"""


def wait_for_quiet_ci() -> None:
    while os.path.exists("/tmp/ci-busy"):
        time.sleep(60)


def test_repeats_give_intervals_in_tables_and_error_bars(tmp_path: Path) -> None:
    import hpcscale.api as hs

    wait_for_quiet_ci()
    (tmp_path / "noise3.yaml").write_text(NOISE)
    wd = tmp_path / "runs"
    hpcscale(
        "submit", str(tmp_path / "noise3.yaml"), "--backend", "local", "-w", str(wd),
        check=True, timeout=1800,
    )  # fmt: skip
    built = hs.report("noise3", wd)
    [rep] = built.reports
    secs = {s.key: s for s in rep.sections}
    table = secs["scaling"].tables[0]
    assert "percentile bootstrap of the median" in table.note
    ci = table.frame.set_index("Ranks")["Speedup 95% CI"]
    assert re.fullmatch(r"\[[0-9.e-]+, [0-9.e-]+\]", ci.loc[2]) and pd.isna(ci.loc[1])
    cell = rep.cells.set_index("ranks").loc[2]
    assert cell["repeats"] == 3
    assert cell["speedup_lo"] <= cell["speedup_hi"]
    assert cell["efficiency_lo"] == pytest.approx(cell["speedup_lo"] / 2)
    fig = secs["scaling"].plots[0].figure
    assert any(type(c).__name__ == "ErrorbarContainer" for c in fig.axes[0].containers)
    eff_fig = secs["efficiency"].plots[0].figure
    assert any(type(c).__name__ == "ErrorbarContainer" for c in eff_fig.axes[0].containers)
    md = (wd / "noise3" / "report" / "index.md").read_text()
    assert "Speedup 95% CI" in md and "Efficiency 95% CI" in md
