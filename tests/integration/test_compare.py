"""`hpcscale compare` (issue 14): real local campaigns side by side (the session's finished
quickstart and a second real DCGAN campaign with a 32 MB fusion buffer, run here through the real
CLI and mpirun), copies of them degraded as a regression would, and the API."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import hpcscale
from hpcscale import api
from hpcscale.analysis import compare as cmp
from hpcscale.model.errors import UsageError
from hpcscale.report import compare as cmp_report
from hpcscale.report.compare import CompareResult
from tests.conftest import hpcscale as run_cli
from tests.quickstart_fixture import run_dir_of

FUSION_YAML = """\
name: quickstart_fusion
description: the quickstart's DCGAN with a 32 MB Horovod fusion buffer
workload:
  model: dcgan
  epochs: 1
  args: {image_size: 32, dataset_size: 64}
system: local
scaling: weak
matrix:
  layout: ["1x1", "2x1"]
  batch: 16
  fusion_threshold_mb: 32
"""
NAME = "quickstart-vs-quickstart_fusion"
METRICS = {
    "Images/s": "images_per_s",
    "Speedup": "speedup",
    "Efficiency": "efficiency",
    "Epoch time (s)": "epoch_time_s",
}


@pytest.fixture(scope="module")
def two_campaigns(finished_quickstart: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workdir holding a copy of the finished quickstart and a second real campaign (the same
    model and image size, fusion threshold 32 MB, one epoch of 64 images: 4 steps at 1 rank, 2
    at 2, which is all the aligned table needs), run through the real CLI."""
    wd = tmp_path_factory.mktemp("compare") / "runs"
    shutil.copytree(finished_quickstart, wd, symlinks=True)
    (wd / "quickstart" / ".collect-cache.json").unlink(missing_ok=True)
    yaml = wd.parent / "quickstart_fusion.yaml"
    yaml.write_text(FUSION_YAML)
    run_cli("submit", str(yaml), "--backend", "local", "-w", str(wd), check=True, timeout=1800)
    return wd


def by_hand(wd: Path, campaign: str) -> dict[str, list[float]]:
    """Each metric at 1 and 2 ranks, computed here from the runs' own metrics.json (one run per
    cell): epoch time = mean epoch time; images/s = the images of the timed epochs (global
    batch x steps per epoch, each epoch) / their total time; weak-scaling speedup = X_2 / X_1,
    efficiency = speedup / 2 (the scale: 2 ranks over the baseline's 1)."""
    runs = {}
    for rd in sorted((wd / campaign / "runs").iterdir()):
        m = json.loads((rd / "metrics.json").read_text())
        times = m["epoch_time_s"]
        images = m["global_batch"] * m["steps_per_epoch"] * len(times)
        runs[json.loads((rd / "run.json").read_text())["ranks"]] = (
            sum(times) / len(times),
            images / sum(times),
        )
    (t1, x1), (t2, x2) = runs[1], runs[2]
    return {
        "epoch_time_s": [t1, t2],
        "images_per_s": [x1, x2],
        "speedup": [1.0, x2 / x1],
        "efficiency": [1.0, x2 / x1 / 2],
    }


def test_two_real_campaigns_side_by_side(two_campaigns: Path) -> None:
    wd = two_campaigns
    proc = run_cli("compare", "quickstart", "quickstart_fusion", "-w", str(wd))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = wd / "compare" / NAME
    assert f"report: {out / 'index.html'}" in proc.stdout
    assert "Images/s on ranks, against quickstart" in proc.stdout

    aligned = pd.read_csv(out / "data" / f"{NAME}-aligned.csv")
    assert list(aligned["Ranks"]) == [1, 2]  # the shared axis detected: ranks
    for campaign in ("quickstart", "quickstart_fusion"):
        expected = by_hand(wd, campaign)
        for heading, metric in METRICS.items():
            column = f"{campaign}: {heading}"
            assert column in aligned.columns
            assert list(aligned[column]) == pytest.approx(expected[metric], rel=1e-9), column
    # the differences table: the change in each metric, by hand
    base, later = by_hand(wd, "quickstart"), by_hand(wd, "quickstart_fusion")

    campaigns = pd.read_csv(out / "data" / f"{NAME}-campaigns.csv").set_index("Campaign")
    assert campaigns.loc["quickstart", "Role"] == "baseline"
    assert list(campaigns["Fusion threshold"].astype(str)) == ["default", "32.0"]
    diffs = pd.read_csv(out / "data" / f"{NAME}-differences.csv")
    assert len(diffs) == 2 * 4 and set(diffs["Campaign"]) == {"quickstart_fusion"}
    at2 = diffs[diffs["Cell"] == "ranks=2"].set_index("Metric")
    for heading, metric in METRICS.items():
        change = 100 * (later[metric][1] - base[metric][1]) / base[metric][1]
        assert at2.loc[heading, "Baseline"] == pytest.approx(base[metric][1], rel=1e-9)
        assert at2.loc[heading, "Change (%)"] == pytest.approx(change, rel=1e-9, abs=1e-9)
    # one run per cell: no interval; the quickstart's 512 images against 64: epoch times of
    # different work are not compared, and the campaigns table says the data sets differ
    assert set(diffs["Verdict"]) == {"no interval", "not comparable (dataset_size differs)"}
    assert set(diffs[diffs["Metric"] == "Epoch time (s)"]["Verdict"]) == {
        "not comparable (dataset_size differs)"
    }
    assert list(campaigns["Data set"]) == [512, 64] and list(campaigns["Epochs"]) == [2, 1]

    png = out / "figures" / f"{NAME}-overlay.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "index.html").read_text()
    assert html.count('<img src="data:image/png;base64,') == 1 and "Campaigns overlaid" in html
    assert 'src="http' not in html and "Campaigns side by side" in html
    md = (out / "index.md").read_text()
    assert f"![Campaigns overlaid](figures/{NAME}-overlay.png)" in md
    assert "## Differences from quickstart" in md and "## Data quality" in md


def _degrade(wd: Path, ranks: int, factor: float) -> None:
    """The run's metrics.json with throughput divided and epoch times multiplied by `factor`."""
    path = run_dir_of(wd, ranks) / "metrics.json"
    m = json.loads(path.read_text())
    m["images_per_s"] = [v / factor for v in m["images_per_s"]]
    m["epoch_time_s"] = [v * factor for v in m["epoch_time_s"]]
    path.write_text(json.dumps(m))
    (wd / "quickstart" / ".collect-cache.json").unlink(missing_ok=True)


def test_check_passes_on_identical_data_and_fails_on_a_regression(
    quickstart_copy: Callable[[], Path],
) -> None:
    before, after = quickstart_copy(), quickstart_copy()
    a, b = str(before / "quickstart"), str(after / "quickstart")
    proc = run_cli("compare", a, b, "--check", "-o", str(after.parent / "same"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 regression(s) beyond 5.0% in 8 comparison(s)" in proc.stdout
    assert "copy0/runs/quickstart" in proc.stdout and "copy1/runs/quickstart" in proc.stdout

    _degrade(after, 2, 2.0)
    out = after.parent / "worse"
    proc = run_cli("compare", a, b, "--check", "--tolerance", "0.05", "-o", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert "images_per_s at ranks=2 regressed from" in err and "(-50.0%" in err
    assert "epoch_time_s at ranks=2 regressed from" in err and "(+100.0%" in err
    assert "4 metric(s) regressed beyond 5.0% against copy0/runs/quickstart" in err
    assert "REGRESSED" in (out / "index.md").read_text()
    # a tolerance above the drop passes; without --check the regression is reported, exit 0
    assert run_cli("compare", a, b, "--check", "--tolerance", "1.5", "-o", str(out)).returncode == 0
    proc = run_cli("compare", a, b, "-o", str(out))
    assert proc.returncode == 0 and "regression:" in proc.stderr

    result = hpcscale.compare([a, b], out=out)  # the API, as hpcscale.compare too
    assert isinstance(result, CompareResult) and not result.passed
    assert {(r.metric, r.cell) for r in result.regressions} == {(m, "ranks=2") for m in cmp.METRICS}
    worst = next(r for r in result.regressions if r.metric == "images_per_s")
    assert worst.change == pytest.approx(-0.5) and worst.baseline == "copy0/runs/quickstart"
    assert result.axis == "ranks" and result.baseline == "copy0/runs/quickstart"


def test_missing_results_are_shown_as_missing(quickstart_copy: Callable[[], Path]) -> None:
    before, after = quickstart_copy(), quickstart_copy()
    bad = run_dir_of(after, 2)
    (bad / "metrics.json").write_text('{"schema_version": 1, "epoch_time_s": [3.9')
    out = after.parent / "gap"
    result = api.compare([str(before / "quickstart"), str(after / "quickstart")], out=out)
    later = result.aligned[result.aligned["campaign"] == "copy1/runs/quickstart"]
    gap = later.set_index("axis_value").loc[2]
    assert not gap["present"] and np.isnan(gap["images_per_s"])
    assert "unreadable_results" in gap["flags"]
    assert result.missing == ["copy1/runs/quickstart: ranks=2"] and not result.regressions
    assert not result.passed  # a cell the baseline measured is gone: not a pass
    md = (out / "index.md").read_text()
    assert "copy1/runs/quickstart: Flags" in md and "unreadable_results" in md
    assert bad.name in md.split("## Data quality", 1)[1]
    # --check fails naming the missing cell; --allow-missing passes it
    a, b = str(before / "quickstart"), str(after / "quickstart")
    proc = run_cli("compare", a, b, "--check", "-o", str(out))
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "1 cell(s) of copy0/runs/quickstart with no value in a later campaign, not compared "
        "(--allow-missing passes them): " in err
    )
    assert "copy1/runs/quickstart: ranks=2" in err and "regressed" not in err
    proc = run_cli("compare", a, b, "--check", "--allow-missing", "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 cell(s) missing" in " ".join(proc.stdout.split())
    assert api.compare([a, b], out=out, allow_missing=True).passed


def test_errors_exit_2_and_write_nothing(two_campaigns: Path, tmp_path: Path) -> None:
    wd = str(two_campaigns)
    out = tmp_path / "out"
    cases = {
        ("quickstart", "nope"): "no campaign 'nope'",
        ("quickstart",): "compare needs two or more campaigns",
        ("quickstart", "quickstart_fusion", "--on", "nodes"): "--on nodes: no campaign varies "
        "nodes (quickstart varies ranks; quickstart_fusion varies ranks)",
        ("quickstart", "quickstart_fusion", "--tolerance", "-0.1"): "--tolerance must be",
        ("quickstart", "quickstart"): "named twice",
    }
    for args, said in cases.items():
        proc = run_cli("compare", *args, "-w", wd, "-o", str(out))
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert said in " ".join(proc.stderr.split()), (args, proc.stderr)
    # a campaign rendered but not run: no finished runs
    fresh = tmp_path / "fresh"
    yaml = tmp_path / "later.yaml"
    yaml.write_text(FUSION_YAML.replace("name: quickstart_fusion", "name: later"))
    run_cli("render", str(yaml), "-w", str(fresh), check=True)
    first = str(two_campaigns / "quickstart")
    proc = run_cli("compare", first, str(yaml), "-w", str(fresh), "-o", str(out))
    assert proc.returncode == 2 and "'" + str(yaml) + "'" in proc.stderr
    assert "has no finished runs to compare" in " ".join(proc.stderr.split())
    assert not out.exists()


def _runs(**columns: list) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    base = {"model": "dcgan", "scaling": "weak", "device": "cpu", "batch_per_rank": 16}
    return pd.DataFrame({**{k: [v] * n for k, v in base.items()}, **columns})


def test_no_shared_axis_names_what_each_varies() -> None:
    by_nodes = _runs(nodes=[1, 2], images_per_s=[10.0, 20.0], epoch_time_s=[1.0, 1.0])
    by_gpus = _runs(
        nodes=[1, 1], device=["gpu"] * 2, gpus_per_node=[1, 2], images_per_s=[5.0, 9.0],
        epoch_time_s=[1.0, 1.0],
    )  # fmt: skip
    with pytest.raises(UsageError) as err:
        cmp.shared_axis({"A": by_nodes, "B": by_gpus})
    assert "share no scale axis (A varies nodes, ranks; B varies gpus)" in str(err.value)
    assert "--on AXIS" in str(err.value)
    assert cmp.shared_axis({"A": by_nodes, "B": by_nodes}) == "nodes"
    with pytest.raises(UsageError, match=r"--on: unknown scaled axis 'cores'"):
        cmp.shared_axis({"A": by_nodes, "B": by_nodes}, on="cores")


def _welch(cell: list[float], base: list[float]) -> tuple[float, float]:
    """95 % Welch t interval of the ratio cell / base, written out on the logs."""
    from scipy import stats

    la, lb = np.log(cell), np.log(base)
    va, vb = la.var(ddof=1) / la.size, lb.var(ddof=1) / lb.size
    df = (va + vb) ** 2 / (va**2 / (la.size - 1) + vb**2 / (lb.size - 1))
    half = float(stats.t.ppf(0.975, df)) * math.sqrt(va + vb)
    d = float(la.mean() - lb.mean())
    return math.exp(d - half), math.exp(d + half)


def test_within_noise_is_not_a_regression() -> None:
    """Repeats give intervals: a 10 % drop whose intervals overlap is within noise (no
    regression); the same drop with tight repeats is beyond noise and regresses."""

    def campaign(at2: list[float]) -> pd.DataFrame:
        x = [100.0, 101.0, 99.0, *at2]
        return _runs(
            nodes=[1, 1, 1, 2, 2, 2], repeat=[0, 1, 2] * 2, images_per_s=x,
            epoch_time_s=[1.0] * 6, run_id=[f"r{i}" for i in range(6)],
        )  # fmt: skip

    base = campaign([200.0, 202.0, 198.0])
    noisy = campaign([180.0, 240.0, 150.0])  # median 180: -10 %, wide interval
    tight = campaign([180.0, 181.0, 179.0])  # median 180: -10 %, narrow interval
    for other, noise, regressed in ((noisy, "within noise", False), (tight, "beyond noise", True)):
        runs = {"base": base, "other": other}
        cells = {n: cmp.campaign_cells(r, "nodes") for n, r in runs.items()}
        aligned, keys = cmp.align(cells, "nodes")
        assert keys == [] and list(aligned["cell"].unique()) == ["nodes=1", "nodes=2"]
        # by hand: 3 repeats give [min, max], a 75 % order-statistic interval of the median
        mine = aligned[(aligned["campaign"] == "other") & (aligned["cell"] == "nodes=2")].iloc[0]
        at2 = list(other["images_per_s"][3:])
        assert (mine["images_per_s_lo"], mine["images_per_s_hi"]) == (min(at2), max(at2))
        assert mine["images_per_s_level"] == 0.75
        # speedup X_2 / X_1 by hand: Welch t on the logs of both cells' repeats
        lo, hi = _welch(at2, [100.0, 101.0, 99.0])
        assert mine["speedup_level"] == 0.95 and mine["base_repeats"] == 3
        assert (mine["speedup_lo"], mine["speedup_hi"]) == (pytest.approx(lo), pytest.approx(hi))
        diffs = cmp.differences(aligned, "base", tolerance=0.05)
        row = diffs[(diffs["cell"] == "nodes=2") & (diffs["metric"] == "images_per_s")].iloc[0]
        assert row["change"] == pytest.approx(-0.1)
        assert (row["noise"], bool(row["regressed"])) == (noise, regressed)
        found = cmp.regressions(diffs, "base", 0.05)
        assert ("images_per_s" in {r.metric for r in found}) is regressed


def test_fields_that_differ_at_the_same_axis_value_are_named() -> None:
    """Two ranks on one node (mpirun) against two ranks on two nodes (SLURM): the row at ranks=2
    compares different node counts, and the report must say so; at ranks=1 nothing differs."""
    local = _runs(ranks=[1, 2], nodes=[1, 1], tasks_per_node=[1, 2], images_per_s=[10.0, 18.0])
    slurm = _runs(ranks=[1, 2], nodes=[1, 2], tasks_per_node=[1, 1], images_per_s=[10.0, 17.0])
    for frame in (local, slurm):
        frame["epoch_time_s"] = 1.0
    cells = {n: cmp.campaign_cells(r, "ranks") for n, r in {"local": local, "slurm": slurm}.items()}
    got = cmp.differing_at_rows(cells, "ranks", [], ["nodes", "tasks_per_node", "model"])
    assert got == {"nodes": ["ranks=2"], "tasks_per_node": ["ranks=2"]}


def _compared(runs: dict[str, pd.DataFrame], axis: str = "nodes") -> pd.DataFrame:
    cells = {n: cmp.campaign_cells(r, axis) for n, r in runs.items()}
    aligned, _ = cmp.align(cells, axis)
    return aligned


def _result(aligned: pd.DataFrame, allow_missing: bool = False) -> CompareResult:
    names = list(dict.fromkeys(aligned["campaign"]))
    diffs = cmp.differences(aligned, names[0], 0.05)
    found = cmp.regressions(diffs, names[0], 0.05)
    return CompareResult("nodes", names, [], aligned, diffs, found, 0.05, None, [], allow_missing)  # type: ignore[arg-type]


def _by_nodes(nodes: list[int], images: list[float], **more: list) -> pd.DataFrame:
    return _runs(
        nodes=nodes, images_per_s=images, epoch_time_s=[256.0 / x for x in images],
        run_id=[f"r{n}" for n in nodes], **more,
    )  # fmt: skip


def test_missing_cells_and_zero_comparisons_fail_the_check() -> None:
    """A cell the baseline measured and a later campaign lacks fails `passed` unless
    allow_missing; a cell only the later campaign has is named but is new, not lost, and does
    not fail; comparing nothing always fails."""
    base = _by_nodes([1, 2], [100.0, 190.0])
    half = _result(_compared({"A": base, "B": _by_nodes([1], [100.0])}))
    assert half.missing == ["B: nodes=2"] and half.compared == 4 and not half.regressions
    assert not half.passed
    assert _result(half.aligned, allow_missing=True).passed
    wider = _result(_compared({"A": base, "B": _by_nodes([1, 2, 4], [100.0, 190.0, 360.0])}))
    assert wider.missing == ["A: nodes=4 (vs B)"] and wider.lost == [] and wider.passed
    assert half.lost == ["B: nodes=2"]
    none = _result(_compared({"A": base, "B": _by_nodes([4, 8], [360.0, 700.0])}))
    assert none.compared == 0 and not none.regressions
    assert not none.passed and not _result(none.aligned, allow_missing=True).passed


def test_speedup_against_a_different_baseline_is_not_compared() -> None:
    """A at nodes 1/2/4, B at nodes 2/4, the same images/s: B's speedup is against nodes=2, so
    its speedup and efficiency are not compared (never regressed); throughput and epoch time
    still are."""
    a = _by_nodes([1, 2, 4], [100.0, 190.0, 360.0])
    b = _by_nodes([2, 4], [190.0, 360.0])
    diffs = cmp.differences(_compared({"A": a, "B": b}), "A", 0.05)
    at2 = diffs[diffs["cell"] == "nodes=2"].set_index("metric")
    for m in ("speedup", "efficiency"):
        assert at2.loc[m, "noise"] == "different baseline (nodes=1 vs 2)"
        assert not at2.loc[m, "regressed"] and at2.loc[m, "better"] is None
    assert at2.loc["images_per_s", "noise"] == "no interval"
    assert at2.loc["epoch_time_s", "noise"] == "no interval"
    assert not diffs["regressed"].any()
    text = " ".join(cmp_report.differences_section(diffs, "A", 0.05, []).text)
    assert "B speedup at nodes=2: different baseline (nodes=1 vs 2)" in text


def test_different_work_is_named_and_its_epoch_times_not_compared() -> None:
    """B = A with a data set twice as large: the campaigns section names the data set size, and
    epoch time is not comparable (never regressed) while images/s is compared."""
    a = _by_nodes([1, 2], [100.0, 190.0], dataset_size=[256, 256])
    b = _by_nodes([1, 2], [100.0, 190.0], dataset_size=[512, 512])
    b["epoch_time_s"] = 2 * a["epoch_time_s"]
    runs = {"A": a, "B": b}
    cells = {n: cmp.campaign_cells(r, "nodes") for n, r in runs.items()}
    aligned, keys = cmp.align(cells, "nodes")
    diffs = cmp.differences(aligned, "A", 0.05).set_index(["cell", "metric"])
    assert (
        diffs.loc[("nodes=2", "epoch_time_s"), "noise"] == "not comparable (dataset_size differs)"
    )
    assert diffs.loc[("nodes=2", "images_per_s"), "noise"] == "no interval"
    assert not diffs["regressed"].any()
    src = [SimpleNamespace(system="local", description="", dir=Path(n)) for n in runs]
    section = cmp_report.campaigns_section(["A", "B"], src, runs, cells, "nodes", keys)  # type: ignore[arg-type]
    assert "different between them are what is compared: Data set." in " ".join(section.text)
    # steps per epoch (from the runs) differing at one row only: named there, epoch time apart
    c = _by_nodes([1, 2], [100.0, 190.0], steps_per_epoch=[8, 8])
    d = _by_nodes([1, 2], [100.0, 190.0], steps_per_epoch=[8, 16])
    cells = {n: cmp.campaign_cells(r, "nodes") for n, r in {"C": c, "D": d}.items()}
    assert cmp.differing_at_rows(cells, "nodes", [], cmp.WORKLOAD_FIELDS) == {
        "steps_per_epoch": ["nodes=2"]
    }
    diffs = cmp.differences(cmp.align(cells, "nodes")[0], "C", 0.05).set_index(["cell", "metric"])
    assert (
        diffs.loc[("nodes=2", "epoch_time_s"), "noise"]
        == "not comparable (steps_per_epoch differs)"
    )
    assert diffs.loc[("nodes=1", "epoch_time_s"), "noise"] == "no interval"


def test_overlay_leaves_a_gap_where_a_cell_is_missing() -> None:
    """B has no value at nodes=2: its line must break there, not run straight from 1 to 4."""
    from hpcscale.report.figures.compare import overlay

    aligned = _compared(
        {
            "A": _by_nodes([1, 2, 4], [100.0, 190.0, 360.0]),
            "B": _by_nodes([1, 4], [100.0, 350.0]),
        }
    )
    fig = overlay(aligned, ["A", "B"], "nodes", [])
    b_line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "B")
    x, y = b_line.get_data()
    assert list(np.asarray(x, float)) == [1.0, 2.0, 4.0]
    assert np.isnan(np.asarray(y, float)[1])
