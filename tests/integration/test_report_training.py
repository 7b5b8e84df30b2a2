"""The report's training figures (#14): learning curves per epoch, one line per scale, epochs to
the validation-accuracy plateau against GPUs, and the GANs' last sample grids (StackGAN: Stage-I
beside Stage-II). Real campaigns through the real CLI: a tiny classifier on a class-folder
dataset (the session's, tests/classifier_fixture.py), the session's finished DCGAN quickstart, a
tiny StackGAN Stage-II run (the session's, tests/stackgan_fixture.py)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from hpcscale import api
from hpcscale.analysis.curves import learning_curves
from hpcscale.report.figures.samples import last_grids
from hpcscale.report.model import CampaignReport, Plot
from hpcscale.report.sections.training import samples_section, training_section
from tests.conftest import hpcscale
from tests.integration.test_jobs import needs_horovod
from tests.quickstart_fixture import run_dir_of

NAN = float("nan")


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Run-table rows with the run fields every row shares filled in."""
    base = {
        "model": "classifier",
        "scaling": "weak",
        "device": "cpu",
        "nodes": 1,
        "batch_per_rank": 4,
        "model_family": "cnn",
        "epoch_time_s": 1.0,
        "epoch_times_s": None,
        "losses": None,
    }
    return pd.DataFrame([{**base, **r} for r in rows])


def axis(fig: Figure, title: str) -> Any:
    found = [ax for ax in fig.axes if ax.get_title() == title]
    assert found, f"no panel {title!r} in {[ax.get_title() for ax in fig.axes]}"
    return found[0]


def drawn(ax: Any) -> dict[str, list[float]]:
    """Label -> y values of the panel's data lines (legend proxies have no data)."""
    return {
        ln.get_label(): list(ln.get_ydata())
        for ln in ax.get_lines()
        if len(ln.get_ydata()) and not ln.get_label().startswith("_")
    }


def plot(sections: list[Any], key: str) -> Plot:
    return next(p for s in sections for p in s.plots if p.key == key)


def section(md: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    assert m, f"no section {title!r}"
    return m.group(1)


# -- learning curves from the run table ---------------------------------------------------------


def test_repeats_fold_to_the_median_per_epoch_and_gaps_stay_gaps() -> None:
    runs = frame(
        [
            {"run_id": "a", "tasks_per_node": 1, "repeat": 0, "val_accuracy": [0.5, 0.6, 0.7]},
            {"run_id": "b", "tasks_per_node": 1, "repeat": 1, "val_accuracy": [0.3, NAN, 0.9]},
            {"run_id": "c", "tasks_per_node": 2, "repeat": 0, "val_accuracy": [0.4, None, 0.8]},
        ]
    )
    cells, curves, skipped = learning_curves(runs)
    assert skipped == []
    assert len(cells) == 2
    one = curves[curves["cell"] == cells.loc[cells["ranks"] == 1, "cell"].iloc[0]]
    assert one["value"].tolist() == pytest.approx([0.4, 0.6, 0.8])
    assert one["runs"].tolist() == [2, 1, 2]  # epoch 2: only the repeat that recorded it

    notes: list[str] = []
    sec = training_section(runs, notes)
    assert sec is not None
    p = plot([sec], "learning_curves")
    lines = drawn(axis(p.figure, "Validation accuracy"))
    assert list(lines) == ["1 rank", "2 ranks"]  # one line per scale
    assert lines["1 rank"] == pytest.approx([0.4, 0.6, 0.8])
    two = lines["2 ranks"]
    assert two[0] == pytest.approx(0.4) and np.isnan(two[1]) and two[2] == pytest.approx(0.8)
    assert "median" in p.caption and "repeats" in p.caption
    assert "never interpolated: 2 ranks val_accuracy epoch(s) 2." in p.caption


def test_epochs_to_plateau_against_gpus_names_cells_that_never_settle() -> None:
    """Seed 004's last figure: more GPUs, later plateau (2, 3, 5 epochs); 16 GPUs never."""
    acc = {
        2: [0.5, 0.9, 0.9, 0.9, 0.9, 0.9],
        4: [0.4, 0.6, 0.88, 0.88, 0.885, 0.88],
        8: [0.3, 0.5, 0.6, 0.7, 0.85, 0.85, 0.85],
        16: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
    }
    runs = frame(
        [
            {"run_id": f"g{n}", "device": "gpu", "tasks_per_node": n, "gpus_per_node": n,
             "val_accuracy": a, "train_accuracy": a}
            for n, a in acc.items()
        ]
    )  # fmt: skip
    sec = training_section(runs, [])
    assert sec is not None
    p = plot([sec], "epochs_to_plateau")
    (ax,) = p.figure.axes
    assert ax.get_xlabel() == "GPUs"
    (line,) = [ln for ln in ax.get_lines() if len(ln.get_xdata())]
    assert list(line.get_xdata()) == [2, 4, 8] and list(line.get_ydata()) == [2, 3, 5]
    assert "No plateau within the epochs run: classifier at 16 GPUs" in p.caption
    table = sec.tables[0].frame
    assert table["GPUs"].tolist() == [2, 4, 8, 16]
    assert table["Plateau epoch"].tolist()[:3] == [2, 3, 5] and np.isnan(table["Plateau epoch"][3])
    curves = plot([sec], "learning_curves").figure
    assert list(drawn(axis(curves, "Validation accuracy"))) == [
        "2 GPUs",
        "4 GPUs",
        "8 GPUs",
        "16 GPUs",
    ]


def test_gan_losses_get_a_panel_each_and_no_plateau() -> None:
    runs = frame(
        [
            {"run_id": f"r{n}", "model": "dcgan", "model_family": "gan", "tasks_per_node": n,
             "losses": {"d_loss": [1.4, 1.2], "g_loss": [0.9 * n, 0.8 * n]}}
            for n in (1, 2)
        ]
    )  # fmt: skip
    sec = training_section(runs, [])
    assert sec is not None and [p.key for p in sec.plots] == ["learning_curves"]
    fig = sec.plots[0].figure
    g = drawn(axis(fig, "Generator loss (g_loss)"))
    assert g == {"1 rank": pytest.approx([0.9, 0.8]), "2 ranks": pytest.approx([1.8, 1.6])}
    assert set(drawn(axis(fig, "Discriminator loss (d_loss)"))) == {"1 rank", "2 ranks"}
    assert not any("accuracy" in ax.get_title() for ax in fig.axes)


def test_last_grid_is_the_highest_epoch_with_stage1_first() -> None:
    grids = ["samples/epoch_001.png", "samples/epoch_001_stage1.png", "samples/epoch_010.png",
             "samples/epoch_010_stage1.png", "samples/epoch_002.png"]  # fmt: skip
    last = last_grids(grids)
    assert last.epoch == 10
    assert last.files == ["samples/epoch_010_stage1.png", "samples/epoch_010.png"]
    assert last_grids([]).epoch is None and last_grids(None).files == []


def test_a_gan_run_without_grids_is_named_in_the_notes(tmp_path: Path) -> None:
    runs = frame(
        [{"run_id": "lonely", "model": "dcgan", "model_family": "gan", "tasks_per_node": 1,
          "sample_grids": [], "run_dir": str(tmp_path)}]
    )  # fmt: skip
    notes: list[str] = []
    assert samples_section(runs, notes) is None
    assert notes == ["run lonely: no sample grid recorded (samples/*.png)"]


def test_no_validation_accuracy_is_said_not_reported_as_no_plateau() -> None:
    runs = frame(
        [
            {"run_id": f"t{n}", "tasks_per_node": n, "train_accuracy": [0.5, 0.7, 0.7]}
            for n in (1, 2)
        ]
    )
    notes: list[str] = []
    sec = training_section(runs, notes)
    assert sec is not None
    said = "no validation accuracy recorded (runs t1, t2): epochs to plateau not measured"
    assert said in notes and not any("no run reached" in n for n in notes)
    assert any(said in p.lower() for p in sec.text)
    assert "Plateau epoch" not in sec.tables[0].frame.columns
    assert "epochs_to_plateau" not in [p.key for p in sec.plots]


def test_runs_without_curves_are_named_and_early_stops_counted() -> None:
    runs = frame(
        [
            {"run_id": "ok", "model": "dcgan", "model_family": "gan", "tasks_per_node": 1,
             "repeat": 0, "losses": {"d_loss": [1.4, 1.2, 1.1], "g_loss": [0.9, 0.8, 0.7]}},
            {"run_id": "short", "model": "dcgan", "model_family": "gan", "tasks_per_node": 1,
             "repeat": 1, "losses": {"d_loss": [1.4], "g_loss": [0.9]}},
            # Parquet hands back a GAN run with no losses as a struct of Nones
            {"run_id": "empty", "model": "dcgan", "model_family": "gan", "tasks_per_node": 2,
             "repeat": 0, "losses": {"d_loss": None, "g_loss": None}},
        ]
    )  # fmt: skip
    cells, _, skipped = learning_curves(runs)
    assert skipped == ["empty"] and len(cells) == 1
    notes: list[str] = []
    sec = training_section(runs, notes)
    assert sec is not None
    assert any("empty" in n and "not drawn" in n for n in notes)
    table = sec.tables[0].frame
    assert table["Repeats"].tolist() == [2] and table["Runs at last epoch"].tolist() == [1]
    assert any("stopped early" in p for p in sec.text)


def test_mixed_stage_pairs_and_single_grids_are_never_mislabelled(tmp_path: Path) -> None:
    from matplotlib import image

    dirs = {}
    for rid, files in {"pair": ["epoch_002_stage1", "epoch_002"], "single": ["epoch_002"]}.items():
        (tmp_path / rid / "samples").mkdir(parents=True)
        for f in files:
            image.imsave(tmp_path / rid / "samples" / f"{f}.png", np.zeros((4, 4, 3)))
        dirs[rid] = [f"samples/{f}.png" for f in files]
    runs = frame(
        [
            {"run_id": rid, "model": "stackgan", "model_family": "gan", "tasks_per_node": 1,
             "repeat": i, "sample_grids": grids, "run_dir": str(tmp_path / rid)}
            for i, (rid, grids) in enumerate(dirs.items())
        ]
    )  # fmt: skip
    notes: list[str] = []
    sec = samples_section(runs, notes)
    assert sec is not None and notes == []
    (p,) = sec.plots
    assert "Stage-I (left)" not in p.caption and "each panel titled" in p.caption
    titles = [ax.get_title() for ax in p.figure.axes if ax.get_images()]
    assert "1 rank, repeat 1, epoch 2" in titles
    assert "1 rank, repeat 0, Stage-I, ep. 2" in titles


# -- a real classifier campaign: learning curves from validation metrics -------------------------


def report_of(workdir: Path, name: str) -> CampaignReport:
    """The report's in-memory model, built the way `hpcscale report` builds it."""
    res = api.report(name, workdir, out=workdir / f"{name}-inspect")
    return res.reports[0]


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_classifier_campaign_report_draws_validation_learning_curves(
    classifier_campaign: Path, tmp_path: Path
) -> None:
    """The session's classifier campaign (tests/classifier_fixture.py: 3 epochs at 1 and 2
    ranks), copied here, since the report writes into it."""
    wd = tmp_path / "runs"
    shutil.copytree(classifier_campaign, wd, symlinks=True)
    hpcscale("report", "curves", "-w", str(wd), check=True)

    md = (wd / "curves" / "report" / "index.md").read_text()
    curves_md = section(md, "Learning curves")
    assert "![Learning curves per epoch](figures/curves-learning_curves.png)" in curves_md
    assert "![Epochs to plateau](figures/curves-epochs_to_plateau.png)" in curves_md
    assert (wd / "curves" / "report" / "figures" / "curves-learning_curves.png").stat().st_size
    html = (wd / "curves" / "report" / "index.html").read_text()
    assert 'alt="Learning curves per epoch: One line per scale' in html

    metrics = {}
    for rd in (wd / "curves" / "runs").iterdir():
        m = json.loads((rd / "metrics.json").read_text())
        metrics[m["ranks"]] = m
    assert set(metrics) == {1, 2}
    rep = report_of(wd, "curves")
    fig = plot(rep.sections, "learning_curves").figure
    val = drawn(axis(fig, "Validation accuracy"))
    assert val == {
        "1 rank": pytest.approx(metrics[1]["val_accuracy"]),
        "2 ranks": pytest.approx(metrics[2]["val_accuracy"]),
    }
    train = drawn(axis(fig, "Training accuracy"))
    assert train["2 ranks"] == pytest.approx(metrics[2]["train_accuracy"])
    assert drawn(axis(fig, "Loss"))["1 rank"] == pytest.approx(metrics[1]["train_loss"])
    assert all(len(v) == 3 for v in val.values())  # the 3 epochs run
    # the last-epoch table shows the same numbers
    last = section(md, "Learning curves")
    row = next(ln for ln in last.splitlines() if ln.startswith("| classifier | 2 "))
    assert f"{metrics[2]['val_accuracy'][-1]:.3g}" in row


# -- GAN sample grids ------------------------------------------------------------------------------


def grid_images(fig: Figure) -> dict[str, np.ndarray]:
    """Panel title -> the image drawn in it."""
    return {ax.get_title(): ax.get_images()[0].get_array() for ax in fig.axes if ax.get_images()}


def test_quickstart_report_shows_the_last_grid_of_each_run(
    quickstart_copy: Callable[[], Path],
) -> None:
    from matplotlib import image

    wd = quickstart_copy()
    hpcscale("report", "quickstart", "-w", str(wd), check=True)
    md = (wd / "quickstart" / "report" / "index.md").read_text()
    grids = section(md, "Sample grids")
    assert (
        "![Last sample grids (epoch 2): dcgan, batch 16/rank](figures/quickstart-samples.png)"
        in grids
    )
    assert "Each run's last sample grid (epoch 2)" in grids
    assert grids.count("samples/epoch_002.png") >= 4  # table and caption, both runs
    assert "epoch_001" not in grids
    assert (wd / "quickstart" / "report" / "figures" / "quickstart-samples.png").stat().st_size

    rep = report_of(wd, "quickstart")
    shown = grid_images(plot(rep.sections, "samples").figure)
    assert set(shown) == {"1 rank, epoch 2", "2 ranks, epoch 2"}
    for ranks, title in ((1, "1 rank, epoch 2"), (2, "2 ranks, epoch 2")):
        on_disk = image.imread(run_dir_of(wd, ranks) / "samples" / "epoch_002.png")
        assert np.array_equal(np.asarray(shown[title]), on_disk)
    assert not [n for n in rep.notes if "sample grid" in n]
    # the GAN's losses per epoch, one line per scale, as its metrics.json recorded them
    curves = plot(rep.sections, "learning_curves").figure
    for name, title in (("g_loss", "Generator loss"), ("d_loss", "Discriminator loss")):
        lines = drawn(axis(curves, f"{title} ({name})"))
        for ranks, label in ((1, "1 rank"), (2, "2 ranks")):
            m = json.loads((run_dir_of(wd, ranks) / "metrics.json").read_text())
            assert lines[label] == pytest.approx(m["losses"][name])


def test_missing_and_unreadable_grids_are_named_in_the_notes(
    quickstart_copy: Callable[[], Path],
) -> None:
    wd = quickstart_copy()
    hpcscale("report", "quickstart", "-w", str(wd), check=True)  # collected: the grids listed
    gone = run_dir_of(wd, 1) / "samples" / "epoch_002.png"
    broken = run_dir_of(wd, 2) / "samples" / "epoch_002.png"
    gone.unlink()
    broken.write_bytes(b"not a png")
    hpcscale("report", "quickstart", "-w", str(wd), check=True)
    md = (wd / "quickstart" / "report" / "index.md").read_text()
    notes = section(md, "Not shown")
    assert f"sample grid {gone} is missing" in notes
    assert f"sample grid {broken} is unreadable" in notes
    table = section(md, "Sample grids")
    assert table.count("| no ") == 2  # neither run's grid decoded; both rows stay


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_stackgan_stage2_grid_beside_its_stage1_grid(
    stackgan_campaign: Path, tmp_path: Path
) -> None:
    """The session's tiny StackGAN Stage-II campaign (tests/stackgan_fixture.py: one run at 2
    ranks, Stage-I trained first), copied here, since the report writes into it."""
    from matplotlib import image

    wd = tmp_path / "runs"
    shutil.copytree(stackgan_campaign, wd, symlinks=True)
    hpcscale("report", "sg", "-w", str(wd), check=True)
    md = (wd / "sg" / "report" / "index.md").read_text()
    grids = section(md, "Sample grids")
    assert "Stage-I (left) beside Stage-II (right)" in grids
    assert "samples/epoch_001_stage1.png, samples/epoch_001.png" in grids

    rep = report_of(wd, "sg")
    fig = plot(rep.sections, "samples").figure
    left, right = [ax for ax in fig.axes if ax.get_images()]
    assert left.get_title() == "2 ranks, Stage-I, ep. 1"
    assert right.get_title() == "2 ranks, Stage-II, ep. 1"
    spec_l, spec_r = left.get_subplotspec(), right.get_subplotspec()
    assert spec_l.rowspan == spec_r.rowspan  # the same row, Stage-I on the left
    assert spec_l.colspan.start < spec_r.colspan.start
    (run,) = list((wd / "sg" / "runs").iterdir())
    stage1 = image.imread(run / "samples" / "epoch_001_stage1.png")
    stage2 = image.imread(run / "samples" / "epoch_001.png")
    assert np.array_equal(np.asarray(left.get_images()[0].get_array()), stage1)
    assert np.array_equal(np.asarray(right.get_images()[0].get_array()), stage2)
    assert stage2.shape[0] > stage1.shape[0]  # Stage-II is the larger image
