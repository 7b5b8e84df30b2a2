"""Issue 13, "no impossible figures" and "the noise shown": extrapolations that refuse to predict
what their data cannot support (and are never negative), names that match the arithmetic, time
to target with a stated target and source, and confidence intervals over repeats.

Pure maths first (unit and hypothesis tests), then the real quickstart (copied, its metrics
edited where said), then a tiny real campaign with `repeats: 3`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcscale.analysis import tables
from hpcscale.analysis.extrapolate import comm_cost, extrapolate, refusals
from hpcscale.analysis.intervals import median_interval, ratio_interval
from hpcscale.analysis.models import fit_amdahl, fit_gustafson, fit_problem
from hpcscale.analysis.noise import overlaps, verdict
from hpcscale.analysis.targets import campaign_targets
from hpcscale.model.targets import parse_target
from hpcscale.report.sections.noise import NO_INTERVAL, comparisons
from tests.conftest import REPO, hpcscale
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


def independent_law(scaling: str, ns: np.ndarray, ys: np.ndarray) -> tuple[float, float]:
    """(a, b) of T = a + b/N (strong) or X = a + b·N (weak) by NumPy's own weighted polyfit,
    weights 1/y on the residuals (relative errors), independent of analysis.models."""
    x = 1.0 / ns if scaling == "strong" else ns
    b, a = np.polyfit(x, ys, 1, w=1.0 / ys)
    return float(a), float(b)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(0.05, 1e4), min_size=3, max_size=8),
    st.sampled_from(["weak", "strong"]),
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=3, max_size=8),
)
@example([10.0, 5.6, 3.4], "strong", [1, 2, 4])  # physical: always one prediction checked
@example([100.0, 190.0, 350.0, 101.0], "weak", [1, 2, 4, 1])
@example([10.0, 4.0, 1.5], "strong", [1, 2, 4])  # super-linear: refused
def test_a_prediction_exactly_when_the_law_is_physical(
    values: list[float], scaling: str, ns: list[int]
) -> None:
    """Every generated group is either predicted or refused (never neither), decided by an
    independent fit: predicted when over-determined with a + b > 0 and a serial fraction
    a / (a + b) in 0..1, and then at the independent fit's values, all positive, inside
    their band; a lower end below zero is shown as 0 and marked `lower_clipped`."""
    n = min(len(values), len(ns))
    sizes = np.asarray(ns[:n], dtype=float)
    ys = np.asarray(values[:n], dtype=float)
    if np.unique(sizes).size < 2:
        return  # one size: no group to fit (the law needs two sizes)
    rows = [
        {"nodes": ns[i], "epoch_time_s": values[i], "images_per_s": values[i], "run_id": f"r{i}"}
        for i in range(n)
    ]
    runs = frame(rows, model="m", scaling=scaling, device="cpu", batch_per_rank=8, global_batch=64)
    runs["repeat"] = runs.groupby("nodes").cumcount()
    at = np.array([16.0, 32.0, 64.0])
    pred = extrapolate(runs, axis="nodes", at=at)
    refused = refusals(runs, axis="nodes")
    a, b = independent_law(scaling, sizes, ys)
    s = a / (a + b) if a + b else math.nan
    physical = a + b > 0 and -1e-9 <= s <= 1 + 1e-9
    if abs(s) < 1e-6 or abs(s - 1) < 1e-6:
        return  # on the 0..1 edge the two fits may round to opposite sides
    if not physical:
        assert pred.empty and len(refused) == 1, (a, b, s)
        return
    assert len(pred) == 3 and refused.empty, (a, b, s, refused)
    expected = a + b / at if scaling == "strong" else a + b * at
    assert pred["predicted"].to_numpy() == pytest.approx(expected, rel=1e-6)
    assert (pred["predicted"] > 0).all()
    assert pred["serial_fraction"].iloc[0] == pytest.approx(s, rel=1e-6, abs=1e-9)
    band = pred.dropna(subset=["lower", "upper"])
    assert (band["lower"] <= band["predicted"]).all() and (band["predicted"] <= band["upper"]).all()
    clipped = band[band["lower_clipped"]]
    assert (clipped["lower"] == 0.0).all() and (band[~band["lower_clipped"]]["lower"] > 0).all()


# -- confidence intervals and "within noise" ----------------------------------------------------


T_4 = 2.7764451051977987  # Student t, 4 degrees of freedom, 97.5th percentile (tables)


def test_intervals_against_hand_computed_values() -> None:
    """Order statistics: 5 repeats give [min, max] at 1 - 2/2^5 = 93.75 %, short of 95 %;
    10 give [x(2), x(9)] at 1 - 2·11/1024. Welch on logs: a = 10·e^(-d, 0, d), b = 5·e^(-d,
    0, d) have equal log variances d², so df = 4 and the interval is 2·exp(±t₄·d·√(2/3))."""
    one = median_interval([3.0])
    assert not one.present and "needs two or more repeats" in one.describe()
    five = median_interval([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (five.lo, five.hi, five.level, five.short) == (1.0, 5.0, 0.9375, True)
    assert five.describe() == (
        "[1, 5], 93.8 % order-statistic interval of the median, 5 repeats "
        "(5 repeats cannot support 95 %: 6 are needed)"
    )
    ten = median_interval([7.0, 3.0, 10.0, 1.0, 5.0, 9.0, 2.0, 8.0, 6.0, 4.0])
    assert (ten.lo, ten.hi, ten.short) == (2.0, 9.0, False)
    assert ten.level == pytest.approx(1 - 2 * 11 / 1024)
    d = 0.01
    spread = np.exp([-d, 0.0, d])
    ratio = ratio_interval(10.0 * spread, 5.0 * spread)
    half = T_4 * d * math.sqrt(2 / 3)
    assert ratio.lo == pytest.approx(2 * math.exp(-half), rel=1e-9)
    assert ratio.hi == pytest.approx(2 * math.exp(half), rel=1e-9)
    assert ratio.level == 0.95 and ratio.repeats == (3, 3)
    assert not ratio_interval([10.0], [5.0, 5.1]).present


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0.001, 1e6), min_size=2, max_size=12))
def test_median_interval_is_two_of_the_samples_around_the_median(xs: list[float]) -> None:
    """The rule by hand: the largest k whose binomial coverage reaches 95 %, else k = 1."""
    n, ordered = len(xs), sorted(xs)

    def cover(k: int) -> float:
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n

    k = max((k for k in range(1, n // 2 + 1) if cover(k) >= 0.95), default=1)
    iv = median_interval(xs)
    assert (iv.lo, iv.hi) == (ordered[k - 1], ordered[n - k])
    assert iv.level == pytest.approx(cover(k)) and iv.short == (cover(k) < 0.95)
    assert iv.lo <= float(np.median(xs)) <= iv.hi


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


def welch_by_hand(cell: list[float], base: list[float]) -> tuple[float, float]:
    """95 % Welch t interval of exp(mean log cell - mean log base), written out: the variance
    of each mean log, Welch–Satterthwaite df, SciPy's t quantile."""
    from scipy import stats

    la, lb = np.log(cell), np.log(base)
    va, vb = la.var(ddof=1) / la.size, lb.var(ddof=1) / lb.size
    df = (va + vb) ** 2 / (va**2 / (la.size - 1) + vb**2 / (lb.size - 1))
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    d = la.mean() - lb.mean()
    return math.exp(d - half), math.exp(d + half)


@pytest.mark.parametrize(
    "base",
    [[100.0, 104.0, 96.0], [100.0, 100.5, 99.5], [80.0, 100.0, 125.0]],
    ids=["baseline-noise", "quiet-baseline", "noisy-baseline"],
)
def test_speedup_interval_counts_the_baseline_noise(base: list[float]) -> None:
    """The same 2-rank repeats against baselines of the same median and different noise: the
    speedup interval is the hand-computed Welch interval of both cells' repeats, so it widens
    with the baseline's noise (an interval that held the baseline fixed would not move)."""
    cell = [150.0, 160.0, 140.0]
    runs = quickstart_like([*base, *cell], [1, 1, 1, 2, 2, 2])
    runs["repeat"] = [0, 1, 2, 0, 1, 2]
    cells = cells_of(runs).set_index("ranks")
    top = cells.loc[2]
    lo, hi = welch_by_hand(cell, base)
    assert (top["speedup_lo"], top["speedup_hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert top["speedup_level"] == 0.95 and top["base_repeats"] == 3
    assert top["efficiency_lo"] == pytest.approx(lo / 2)
    assert top["efficiency_hi"] == pytest.approx(hi / 2)
    assert np.isnan(cells.loc[1, "speedup_lo"])  # 1 by definition


def test_speedup_interval_width_follows_the_baseline() -> None:
    """Hand-computed: with the cell's repeats fixed, a quiet baseline gives a narrower speedup
    interval than a noisy one (log widths 2·t·se, se² = s²_cell/3 + s²_base/3)."""
    widths = []
    for base in ([100.0, 100.5, 99.5], [80.0, 100.0, 125.0]):
        runs = quickstart_like([*base, 150.0, 160.0, 140.0], [1, 1, 1, 2, 2, 2])
        runs["repeat"] = [0, 1, 2, 0, 1, 2]
        top = cells_of(runs).set_index("ranks").loc[2]
        widths.append(math.log(top["speedup_hi"] / top["speedup_lo"]))
    quiet, noisy = widths
    assert noisy > 2 * quiet


def strong_campaign(repeats: dict[int, int]) -> pd.DataFrame:
    """Two MPI flavours scaled strongly over nodes, `repeats[nodes]` runs per cell, times with
    a little spread (the numbers do not matter here, only what the intervals are called)."""
    rows = []
    for mpi, slower in (("openmpi", 1.0), ("mvapich2", 1.05)):
        for nodes, t in ((1, 40.0), (2, 22.0), (4, 12.0)):
            for r in range(repeats[nodes]):
                v = t * slower * (1 + 0.01 * (r - 1))
                rows.append(
                    {"run_id": f"{mpi}{nodes}-{r}", "repeat": r, "nodes": nodes, "mpi": mpi,
                     "epoch_time_s": v, "images_per_s": 6400 / v}
                )  # fmt: skip
    return frame(
        rows, model="dcgan", scaling="strong", device="cpu", batch_per_rank=8, global_batch=64,
        dataset_size=6400, tasks_per_node=1,
    )  # fmt: skip


def test_every_interval_names_its_method_and_level() -> None:
    """Tables, figures and captions of a report and of a comparison: each interval says how it
    was made and its real level (3 repeats: 75 %; 5: 1 - 2/32 = 93.75 %; ratios: 95 % Welch)."""
    from hpcscale.analysis import compare as cmp
    from hpcscale.report import compare as cmp_report
    from hpcscale.report.sections import campaign_report

    runs = strong_campaign({1: 3, 2: 3, 4: 5})
    rep = campaign_report(runs, "demo")
    secs = {s.key: s for s in rep.sections}
    said = " ".join(
        [*(t for s in rep.sections for t in s.text)]
        + [t.note for s in rep.sections for t in s.tables]
        + [p.caption for s in rep.sections for p in s.plots]
    )
    assert "95% CI" not in said and "bootstrap" not in said
    scaling = secs["scaling"].tables[0]
    for column in (tables.SPEEDUP_CI, tables.EFFICIENCY_CI):
        assert "95 %" in column and "Welch t" in column and column in scaling.frame.columns
    levels = scaling.frame.set_index("Nodes")[tables.IMAGES_CI].groupby(level=0).agg(set)
    assert {v[-7:] for v in levels.loc[1] | levels.loc[2]} == {" (75 %)"}
    assert {v[-9:] for v in levels.loc[4]} == {" (93.8 %)"}
    assert "75 % with 3 repeats (3 repeats cannot support 95 %: 6 are needed)" in scaling.note
    assert "93.8 % with 5 repeats (5 repeats cannot support 95 %: 6 are needed)" in scaling.note
    assert "95 % Welch t interval on the log ratio" in scaling.note
    both = secs["scaling"].tables[1]  # which flavour is faster
    assert all(v.endswith(("(75 %)", "(93.8 %)")) for v in both.frame["A interval"])
    assert "order-statistic interval of the median" in both.note
    overhead = secs["efficiency"].tables[0]
    assert "Welch t" in overhead.note and "order-statistic" not in overhead.note
    for key, bars in (
        ("scaling", "order-statistic interval of the median (75 % with 3 repeats, 93.8 % with 5"),
        ("efficiency", "95 % Welch t interval"),
    ):
        plot = secs[key].plots[0]
        legend = " ".join(t.get_text() for t in plot.figure.axes[0].get_legend().get_texts())
        assert "error bars: " + bars in legend, legend
    assert "75 % with 3 repeats" in secs["scaling"].plots[0].caption
    assert "95 % Welch t interval" in secs["efficiency"].plots[0].caption
    text = " ".join(secs["scaling"].text)
    assert "10 % of the time with 3 each" in text  # 2 of C(6, 3) = 20 orderings, by hand

    # compare: the overlay's bars and the differences' note name both methods and their levels
    campaigns = {"A": strong_campaign({1: 3, 2: 3, 4: 3}), "B": strong_campaign({1: 3, 2: 3, 4: 3})}
    cells = {n: cmp.campaign_cells(r, "nodes") for n, r in campaigns.items()}
    aligned, keys = cmp.align(cells, "nodes")
    section = cmp_report.aligned_section(aligned, ["A", "B"], "nodes", keys)
    caption = section.plots[0].caption
    assert "75 % with 3 repeats" in caption and "95 % Welch t interval" in caption
    fig_legend = " ".join(t.get_text() for t in section.plots[0].figure.legends[0].get_texts())
    assert "error bars: 75 % order-statistic interval of the median (3 repeats)" in fig_legend
    assert "error bars: 95 % Welch t interval" in fig_legend
    diffs = cmp.differences(aligned, "A", 0.05)
    note = cmp_report.differences_section(diffs, "A", 0.05, [], caption).tables[0].note
    assert "order-statistic interval of the median" in note and "Welch t" in note


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

# The own-program example (mpi4py + NumPy, figures from its hpcscale.probe lines): real runs
# whose throughput really varies, at a second each rather than a TensorFlow start-up each.
NOISE = f"""\
name: noise3
workload:
  command: [python, mpi_numpy_logreg.py, --batch-size, "{{batch_per_rank}}", --epochs,
            "{{epochs}}", --seed, "{{repeat}}", --samples, "4000"]
  cwd: {REPO / "examples"}
  metrics: mllog
  throughput: images_per_s
  epochs: 2
system: local
scaling: weak
repeats: 3
matrix:
  layout: ["1x1", "2x1"]
  batch: 16
"""


def test_repeats_give_intervals_in_tables_and_error_bars(tmp_path: Path) -> None:
    import hpcscale.api as hs

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
    assert "Images/s: order-statistic interval of the median" in table.note
    assert "75 % with 3 repeats (3 repeats cannot support 95 %: 6 are needed)" in table.note
    assert "Speedup and efficiency: 95 % Welch t interval" in table.note
    ci = table.frame.set_index("Ranks")[tables.SPEEDUP_CI]
    assert re.fullmatch(r"\[[0-9.e-]+, [0-9.e-]+\]", ci.loc[2]) and pd.isna(ci.loc[1])
    # the runs' own images/s, by hand: [min, max] of the 3 repeats at 75 %
    per = rep.runs.set_index("ranks")["images_per_s"]
    for ranks in (1, 2):
        x = per.loc[ranks]
        said = table.frame.set_index("Ranks").loc[ranks, tables.IMAGES_CI]
        assert said == f"[{x.min():.4g}, {x.max():.4g}] (75 %)"
    cell = rep.cells.set_index("ranks").loc[2]
    assert cell["repeats"] == 3
    lo, hi = welch_by_hand(list(per.loc[2]), list(per.loc[1]))
    assert (cell["speedup_lo"], cell["speedup_hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert cell["efficiency_lo"] == pytest.approx(lo / 2)
    fig = secs["scaling"].plots[0].figure
    assert any(type(c).__name__ == "ErrorbarContainer" for c in fig.axes[0].containers)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    bars = "error bars: 75 % order-statistic interval of the median (3 repeats)"
    assert bars in legend
    assert "75 % with 3 repeats" in secs["scaling"].plots[0].caption
    eff_fig = secs["efficiency"].plots[0].figure
    assert any(type(c).__name__ == "ErrorbarContainer" for c in eff_fig.axes[0].containers)
    eff_legend = [t.get_text() for t in eff_fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("error bars: 95 % Welch t interval") for t in eff_legend)
    assert "95 % Welch t interval" in secs["efficiency"].plots[0].caption
    md = (wd / "noise3" / "report" / "index.md").read_text()
    assert tables.SPEEDUP_CI in md and tables.EFFICIENCY_CI in md and tables.IMAGES_CI in md
    assert "95% CI" not in md and "bootstrap" not in md
