"""The report: sections, tables and figures from the seed reports' numbers (no runs needed), and
the whole `hpcscale report` command on a real local campaign (real mpirun + Horovod runs)."""

from __future__ import annotations

import io
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.transforms import Bbox

from hpcscale.analysis import tables
from hpcscale.analysis.references import check_references
from hpcscale.analysis.tables import fusion_grid
from hpcscale.analysis.targets import campaign_targets
from hpcscale.model.campaign import Reference
from hpcscale.model.targets import parse_target
from hpcscale.report import figures
from hpcscale.report.build import write
from hpcscale.report.figures import png_bytes
from hpcscale.report.model import CampaignReport
from hpcscale.report.sections import campaign_report
from tests.conftest import CAMPAIGNS, hpcscale
from tests.unit.analysis.test_analysis import SEED000_TABLE, frame, seed000_frame

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CELEBA = 202_599


# -- seed frames (numbers transcribed from ../shared/seeds) ----------------------------------
# Seed 000's frame and table come from the analysis tests (one transcription).

# Seed 001, DCGAN: scaling, nodes, device, epoch time, fit time.
SEED001_DCGAN = """
S 1 CPU 962.12 4810.59
S 2 CPU 552.71 2772.97
S 4 CPU 334.54 1687.65
S 8 CPU 230.23 1182.34
W 1 CPU 962.12 4810.59
W 2 CPU 523.09 2622.07
W 4 CPU 276.58 1388.14
W 8 CPU 149.04 770.97
S 1 GPU 147.00 735.12
S 2 GPU 107.20 568.05
S 4 GPU 91.10 480.29
S 8 GPU 95.98 521.15
W 1 GPU 147.00 735.12
W 2 GPU 95.70 515.81
W 4 GPU 52.40 274.11
W 8 GPU 39.87 210.71
"""


def seed001_scaling() -> pd.DataFrame:
    rows = []
    for line in SEED001_DCGAN.strip().splitlines():
        s, n, dev, t, fit = line.split()
        strong = s == "S"
        rows.append(
            {
                "scaling": "strong" if strong else "weak",
                "device": dev.lower(),
                "nodes": int(n),
                "batch_per_rank": 128 // int(n) if strong else 128,
                "epoch_time_s": float(t),
                "fit_time_s": float(fit),
            }
        )
    return frame(rows, model="dcgan", tasks_per_node=1, mpi="mvapich2-gdr", dataset_size=CELEBA)


# Seed 001 GPU tensor fusion: cycle (ms), buffer (MB), T, wait for data, wait other, C.
SEED001_GPU_FUSION = """
1 32 95.07 0.726 0.087 9.72
3.5 32 95.64 0.729 0.087 10.63
10 32 95.77 0.726 0.087 10.07
25 32 96.19 0.725 0.0867 10.71
100 32 96.3 0.72 0.0865 10.69
1 64 96.39 0.728 0.0868 10.08
3.5 64 95.35 0.749 0.087 9.663
10 64 97.33 0.73 0.087 8.53
25 64 98.45 0.731 0.087 11.089
100 64 98.04 0.732 0.086 10.78
1 256 97.87 0.727 0.087 10.47
3.5 256 98.9 0.729 0.087 10.023
10 256 99.28 0.728 0.0875 10.23
25 256 100.42 0.724 0.0867 10.36
100 256 105.25 0.719 0.087 11.71
"""


def seed001_fusion() -> pd.DataFrame:
    rows = []
    for line in SEED001_GPU_FUSION.strip().splitlines():
        cycle, buf, t, wfd, wfo, c = map(float, line.split())
        rows.append(
            {
                "cycle_time_ms": cycle,
                "fusion_threshold_mb": buf,
                "epoch_time_s": t,
                "wait_for_data_s": wfd,
                "wait_for_other_tensor_data_s": wfo,
                "comm_s": c,
            }
        )
    return frame(rows, model="dcgan", scaling="none", device="gpu", nodes=2, batch_per_rank=32)


# Seed 001 single-node batch sweep, DCGAN: device, batch, epoch time.
SEED001_BATCH = """
CPU 8 1449.40
CPU 16 1176.28
CPU 32 1247.90
CPU 64 996.38
CPU 128 962.12
GPU 8 416.86
GPU 16 243.35
GPU 32 178.89
GPU 64 155.10
GPU 128 147.00
"""


def seed001_batch() -> pd.DataFrame:
    rows = [
        {"device": d.lower(), "batch_per_rank": int(b), "epoch_time_s": float(t)}
        for d, b, t in (line.split() for line in SEED001_BATCH.strip().splitlines())
    ]
    return frame(rows, model="dcgan", scaling="none", nodes=1, dataset_size=CELEBA)


def seed001_precision_and_hierarchical() -> pd.DataFrame:
    """Seed 001's FP16 / mixed-precision and hierarchical all-reduce tables (4 GPU nodes)."""
    rows = [  # fp16, mp, hierarchical, buffer, T, wait for data, wait other, C
        (False, False, False, 64, 112.61, 0.718, 0.087, 26.9),
        (True, False, False, 64, 177.16, 0.729, 0.087, 26.69),
        (False, True, False, 64, 191.17, 0.459, 0.093, 25.98),
        (False, False, True, 32, 112.94, 0.719, 0.0867, 25.25),
        (False, False, False, 32, 100.53, 0.733, 0.086, 30.99),
        (False, False, True, 64, 116.33, 0.713, 0.0865, 27.12),
    ]
    keys = (
        "fp16_allreduce",
        "mixed_precision",
        "hierarchical_allreduce",
        "fusion_threshold_mb",
        "epoch_time_s",
        "wait_for_data_s",
        "wait_for_other_tensor_data_s",
        "comm_s",
    )
    return frame(
        [dict(zip(keys, r, strict=True)) for r in rows],
        model="dcgan",
        scaling="none",
        device="gpu",
        nodes=4,
        batch_per_rank=32,
        cycle_time_ms=3.5,
    )


def seed002_layouts() -> pd.DataFrame:
    """Seed 002's 28-core CPU nodes as ranks x threads (the throughputs its text states)."""
    rows = [
        {"model": "resnet50", "tasks_per_node": 2, "threads_per_task": 14, "images_per_s": 23.34},
        {"model": "resnet50", "tasks_per_node": 4, "threads_per_task": 7, "images_per_s": 22.97},
    ]
    return frame(rows, scaling="none", device="cpu", nodes=1, global_batch=128, epoch_time_s=1.0)


# Seed 004: epochs to a stable validation-accuracy maximum, epoch time, final accuracy.
SEED004 = {2: (15, 209.0, 0.6888), 4: (20, 80.0, 0.6861), 8: (25, 44.0, 0.6719)}


def seed004() -> pd.DataFrame:
    """Per-epoch accuracies are plots in the seed; these curves rise linearly to its final
    validation accuracy at its plateau epoch, then stay there for the rest of the 30 epochs."""
    rows = []
    for gpus, (plateau, t, acc) in SEED004.items():
        epochs = np.arange(1, 31)
        rows.append(
            {
                "nodes": 1,
                "tasks_per_node": gpus,
                "gpus_per_node": gpus,
                "epoch_time_s": t,
                "epoch_times_s": [t] * 30,
                "val_accuracy": list(acc * np.minimum(1.0, epochs / plateau)),
                "losses": {"loss": list(3.0 / np.sqrt(epochs * 4 / gpus))},
            }
        )
    return frame(
        rows,
        model="resnet50",
        model_family="cnn",  # a classifier: its default target is the val. accuracy plateau
        scaling="weak",
        device="gpu",
        batch_per_rank=32,
        dataset_size=30_607,
    )


def sections_of(rep: CampaignReport) -> dict[str, Any]:
    return {s.key: s for s in rep.sections}


# -- figure checks -------------------------------------------------------------------------------


def check_png(data: bytes) -> tuple[int, int]:
    from PIL import Image

    assert data[:8] == PNG_SIGNATURE
    with Image.open(io.BytesIO(data)) as img:
        img.verify()
    with Image.open(io.BytesIO(data)) as img:
        w, h = img.size
    assert 600 <= w <= 2500 and 300 <= h <= 4000, (w, h)  # 150 dpi, a page wide at most
    return w, h


def text_boxes(fig: Figure) -> list[tuple[str, Bbox]]:
    """Titles, axis labels, tick labels and legends of every axes, in display space."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes: list[tuple[str, Bbox]] = []
    for ax in fig.axes:
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label]
        texts += [
            t
            for t in ax.get_xticklabels()
            if t.get_text() and _inside(ax.get_xlim(), t.get_position()[0])
        ]
        texts += [
            t
            for t in ax.get_yticklabels()
            if t.get_text() and _inside(ax.get_ylim(), t.get_position()[1])
        ]
        boxes += [
            (t.get_text(), t.get_window_extent(renderer))
            for t in texts
            if t.get_visible() and t.get_text()
        ]
        if ax.get_legend() is not None:
            boxes.append(("legend", ax.get_legend().get_window_extent(renderer)))
    boxes += [("figure legend", lg.get_window_extent(renderer)) for lg in fig.legends]
    return boxes


def _inside(lim: tuple[float, float], v: float) -> bool:
    """Tick labels outside the view limits exist but are not drawn."""
    lo, hi = sorted(lim)
    return lo - 1e-9 * abs(hi - lo) <= v <= hi + 1e-9 * abs(hi - lo)


def overlapping(fig: Figure) -> list[tuple[str, str]]:
    boxes = text_boxes(fig)
    bad = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1 :]:
            inter = Bbox.intersection(ba, bb)
            if inter is not None and inter.width > 1 and inter.height > 1:
                bad.append((a, b))
    return bad


def check_figure(fig: Figure) -> None:
    """Readable in print: every axes says what and in which unit, nothing overlaps, the whole
    figure stays inside its canvas."""
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            assert ax.get_ylabel() or ax.get_xlabel()
            continue
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
        assert re.search(r"\(.+\)", ax.get_xlabel() + ax.get_ylabel()), "no unit on any axis"
    assert overlapping(fig) == []
    page = fig.bbox
    for name, box in text_boxes(fig):
        assert box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1, name
        assert box.y0 >= page.y0 - 1 and box.y1 <= page.y1 + 1, name
    check_png(png_bytes(fig))


# -- seed-frame tests ---------------------------------------------------------------------------


def test_seed000_efficiency_per_strategy_table_and_figure() -> None:
    rep = campaign_report(seed000_frame(), "seed000")
    secs = sections_of(rep)
    assert "efficiency" in secs and "scaling" in secs
    assert not {"fusion", "batch", "layouts", "precision", "hierarchical", "overlap"} & set(secs)
    table = secs["efficiency"].tables[0].frame
    got = {
        (r["Strategy"], r["# GPUs"]): (
            round(r[tables.OVERHEAD_LABEL], 2),  # seed 000's "Comm. overhead", named as it is
            round(r["Efficiency"], 2),
        )
        for _, r in table.iterrows()
    }
    assert got == {(s, n): v for s, rows in SEED000_TABLE.items() for n, v in rows.items()}
    (plot,) = secs["efficiency"].plots
    lines = {ln.get_label(): ln for ln in plot.figure.axes[0].get_lines()}
    nccl = next(ln for name, ln in lines.items() if "NcclAllReduce" in name)
    np.testing.assert_allclose(nccl.get_ydata(), [1.0, 230 / 250, 230 / 280, 230 / 312])
    assert any("ReductionToOneDevice" in name for name in lines)
    assert any(name.startswith("ideal") for name in lines)
    check_figure(plot.figure)


def test_seed001_scaling_figures_and_extrapolation_band() -> None:
    rep = campaign_report(seed001_scaling(), "seed001")
    secs = sections_of(rep)
    assert {"scaling", "efficiency", "extrapolation"} <= set(secs)
    assert not {"fusion", "batch", "layouts", "overlap"} & set(secs)
    assert len(secs["scaling"].tables[0].frame) == 16
    throughput = secs["scaling"].plots[0].figure
    assert [ax.get_title() for ax in throughput.axes] == ["Weak scaling", "Strong scaling"]
    weak = throughput.axes[0]
    ideal = [ln for ln in weak.get_lines() if ln.get_linestyle() == "--" and len(ln.get_xdata())]
    assert len(ideal) == 2  # CPU and GPU groups, each with its ideal line
    np.testing.assert_allclose(sorted(ideal[0].get_xdata()), [1, 2, 4, 8])
    check_figure(throughput)
    pred = secs["extrapolation"].tables[0].frame
    assert set(pred["Nodes"]) == {16, 32}
    assert pred["Kind"].str.startswith("prediction").all()
    assert (pred["Lower"] < pred["Predicted"]).all() and (pred["Predicted"] < pred["Upper"]).all()
    fig = secs["extrapolation"].plots[0].figure
    assert all("prediction" in ax.get_title() for ax in fig.axes)
    assert any(isinstance(c, PolyCollection) for ax in fig.axes for c in ax.collections)
    check_figure(fig)


def test_seed001_fusion_heat_map_and_overlap_bars() -> None:
    rep = campaign_report(seed001_fusion(), "fusion")
    secs = sections_of(rep)
    assert {"fusion", "overlap"} <= set(secs)
    assert "efficiency" not in secs  # scaling: none
    assert len(secs["fusion"].tables[0].frame) == 15
    heat = secs["fusion"].plots[0].figure
    images = [im for ax in heat.axes for im in ax.get_images() if isinstance(im, AxesImage)]
    assert len(images) == 2  # epoch time and communication-only share
    grid = fusion_grid(rep.cells)
    np.testing.assert_array_equal(images[0].get_array(), grid.to_numpy())
    assert grid.loc[3.5, 64.0] == 95.35
    check_figure(heat)
    bars = secs["overlap"].plots[0].figure
    patches = bars.axes[0].patches
    assert len(patches) == 3 * 15
    # Each bar's three parts add up to that cell's epoch time.
    ends = sorted(round(p.get_x() + p.get_width(), 6) for p in patches[30:])
    assert ends == sorted(round(t, 6) for t in rep.cells["epoch_time_s"])
    check_figure(bars)


def test_seed001_batch_curves_cpu_solid_gpu_dashed() -> None:
    rep = campaign_report(seed001_batch(), "batch")
    secs = sections_of(rep)
    assert "batch" in secs and len(secs["batch"].tables[0].frame) == 10
    fig = secs["batch"].plots[0].figure
    lines = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) == 5]
    styles = {ln.get_label(): ln.get_linestyle() for ln in lines}
    assert styles == {"dcgan, CPU": "-", "dcgan, GPU": "--"}
    gpu = next(ln for ln in lines if ln.get_label() == "dcgan, GPU")
    np.testing.assert_allclose(
        gpu.get_ydata(), CELEBA / np.array([416.86, 243.35, 178.89, 155.10, 147.00])
    )
    check_figure(fig)


def test_seed001_precision_and_hierarchical_sections() -> None:
    rep = campaign_report(seed001_precision_and_hierarchical(), "knobs")
    secs = sections_of(rep)
    prec = secs["precision"].tables[0].frame
    assert {"No FP16/MP", "FP16", "MP"} <= set(prec["Type"])
    # The plain scaling table cannot tell these cells apart by its own columns: it names them.
    runs = secs["scaling"].tables[0].frame.set_index("Epoch time (s)")["Setting"]
    assert runs[177.16] == "fusion threshold 64 MB, fp16 all-reduce"
    assert runs[191.17] == "fusion threshold 64 MB, mixed precision"
    assert runs[112.94] == "fusion threshold 32 MB, hierarchical all-reduce"
    assert runs[112.61] == "fusion threshold 64 MB"
    hier = secs["hierarchical"].tables[0].frame
    assert set(zip(hier["Fusion buffer (MB)"], hier["Hierarchical?"], strict=True)) >= {
        (32.0, "Yes"),
        (32.0, "No"),
        (64.0, "Yes"),
        (64.0, "No"),
    }


def test_seed002_layout_section() -> None:
    secs = sections_of(campaign_report(seed002_layouts(), "layouts"))
    table = secs["layouts"].tables[0].frame
    assert table["Layout"].tolist() == ["2x14", "4x7"]
    assert table["Images/s"].tolist() == [23.34, 22.97]


def test_seed004_time_to_plateau_against_ranks() -> None:
    rep = campaign_report(seed004(), "seed004")
    secs = sections_of(rep)
    table = secs["targets"].tables[0].frame.set_index("Ranks")
    for gpus, (plateau, t, _) in SEED004.items():
        assert table.loc[gpus, "Plateau epoch"] == plateau
        assert table.loc[gpus, "Time to plateau (s)"] == pytest.approx(plateau * t)
    fig = secs["targets"].plots[0].figure
    assert len(fig.axes) == 1  # a classifier's default: the plateau only (no loss target)
    plateau_line = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(plateau_line.get_ydata(), [15 * 209.0, 20 * 80.0, 25 * 44.0])
    check_figure(fig)


def two_strategies_at_the_same_ranks() -> pd.DataFrame:
    """Horovod (one node, a GPU per rank) and MirroredStrategy (one GPU per node) at 2 and 4
    ranks, same batch; Horovod repeated at 2 ranks. Every run reaches the target (loss 0.5)
    at its third epoch, so time to target = 3 x epoch time."""
    runs = [  # strategy, ranks, epoch time (s)
        ("horovod", 2, 10.0),
        ("horovod", 2, 14.0),
        ("horovod", 4, 6.0),
        ("mirrored", 2, 20.0),
        ("mirrored", 4, 11.0),
    ]
    rows = [
        {
            "strategy": strategy,
            "nodes": 1 if strategy == "horovod" else ranks,
            "tasks_per_node": ranks if strategy == "horovod" else 1,
            "gpus_per_node": ranks if strategy == "horovod" else 1,
            "repeat": i,
            "epoch_time_s": t,
            "epoch_times_s": [t] * 3,
            "losses": {"loss": [2.0, 1.0, 0.5]},
        }
        for i, (strategy, ranks, t) in enumerate(runs)
    ]
    return frame(rows, model="dcgan", scaling="none", device="gpu", batch_per_rank=32)


def test_time_to_target_keeps_two_strategies_at_the_same_ranks_apart() -> None:
    """The figure folds repeats with the analysis' cell keys: one point per cell, one line per
    strategy (a median over (model, device, batch, ranks) merged them into one line)."""
    target = [parse_target("loss<=0.5", "test")]
    found = campaign_targets(two_strategies_at_the_same_ranks(), target)
    fig = figures.time_to_target(found.cells)
    assert fig is not None
    lines = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata())]
    got = {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in lines}
    assert got == {
        "Horovod (openmpi)": ([2, 4], [36.0, 18.0]),  # median of 30 and 42 s at 2 ranks
        "MirroredStrategy": ([2, 4], [60.0, 33.0]),
    }
    check_figure(fig)
    rep = campaign_report(two_strategies_at_the_same_ranks(), "two", targets=target)
    section = sections_of(rep)["targets"]
    table = section.tables[0].frame[["Setting", "Ranks", "Time to target (s)"]]
    assert sorted(table.itertuples(index=False, name=None)) == [
        ("Horovod (openmpi)", 2, 36.0),
        ("Horovod (openmpi)", 4, 18.0),
        ("MirroredStrategy", 2, 60.0),
        ("MirroredStrategy", 4, 33.0),
    ]


def test_campaign_references_checked_as_written_either_tolerance_sign() -> None:
    rep = campaign_report(seed000_frame(), "seed000")
    where = {"gpus": 8, "cross_device_ops": "nccl"}  # efficiency 230/312 = 0.737
    ok = Reference(metric="efficiency", where=where, value=0.8, lower=0.1)  # >= 0.72
    ok_reframe = Reference(metric="efficiency", where=where, value=0.8, lower=-0.1)
    bad = Reference(metric="efficiency", where=where, value=0.8, lower=0.05)  # >= 0.76
    as_mapping = {"metric": "efficiency", "where": where, "value": 0.8, "lower": 0.1}
    results = check_references(rep.cells, [ok, ok_reframe, bad, as_mapping])
    assert [r.passed for r in results] == [True, True, False, True]
    assert "efficiency[gpus=8, cross_device_ops=nccl]" in results[2].message
    rep = campaign_report(seed000_frame(), "seed000", references=[ok, bad])
    table = sections_of(rep)["references"].tables[0].frame
    assert table["Result"].tolist() == ["PASS", "FAIL"]


class _Balance(HTMLParser):
    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.open and self.open[-1] == tag:
            self.open.pop()
        else:
            self.errors.append(f"</{tag}> closes <{self.open[-1] if self.open else ''}>")


def check_html(text: str) -> None:
    """Every element closed in order: a browser would not have to guess the structure."""
    parser = _Balance()
    parser.feed(text)
    assert parser.errors == [] and parser.open == []


def md_tables(md: str) -> list[list[str]]:
    """The Markdown tables of a document, each as its lines (header, rule, rows)."""
    tables, current = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def test_written_report_for_several_campaigns(tmp_path: Path) -> None:
    reports = [
        campaign_report(seed000_frame(), "seed000"),
        campaign_report(seed001_fusion(), "fusion"),
        campaign_report(seed004(), "seed004"),
    ]
    result = write(reports, tmp_path, ["md", "html", "csv", "parquet"], stamp="now")
    assert not result.problems
    md = (tmp_path / "index.md").read_text()
    for rep in reports:
        assert f"\n## {rep.name}\n" in md
        for sec in rep.sections:
            assert f"### {sec.title}" in md
            for plot in sec.plots:
                assert f"]({plot.file})" in md
                check_png((tmp_path / plot.file).read_bytes())
    tables = md_tables(md)
    assert len(tables) == sum(len(s.tables) for r in reports for s in r.sections)
    assert all(len(t) >= 3 for t in tables)  # header, rule and at least one row
    html = (tmp_path / "index.html").read_text()
    n_plots = sum(len(s.plots) for r in reports for s in r.sections)
    assert html.count('src="data:image/png;base64,') == n_plots
    assert not re.search(r'src="(?!data:)', html)  # self-contained
    check_html(html)
    runs = pd.read_csv(tmp_path / "data" / "seed004-runs.csv")
    assert json.loads(runs["val_accuracy"][0])[14] == pytest.approx(0.6888)
    cells = pd.read_parquet(tmp_path / "data" / "fusion-cells.parquet")
    assert len(cells) == 15


def test_parquet_unavailable_is_a_clear_error_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow is importable here; a broken one is simulated by hiding it (no real part can
    break the installed binary for one test)."""
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    result = write([campaign_report(seed000_frame(), "seed000")], tmp_path, ["md", "parquet"])
    assert (tmp_path / "index.md").exists()
    assert len(result.problems) == 1 and "pyarrow" in result.problems[0]
    assert not list(tmp_path.glob("data/*.parquet"))


# -- a real campaign ----------------------------------------------------------------------------

# The session's finished quickstart (tests/quickstart_fixture.py: DCGAN, 1 and 2 ranks, Horovod
# timeline on), copied: the report tests need a real campaign, not one more TensorFlow run.
REAL = "quickstart"


def campaign_yaml(path: Path, references: list[dict[str, Any]]) -> Path:
    """The quickstart campaign (the file its runs were rendered from) with these references."""
    spec = yaml.safe_load((CAMPAIGNS / "quickstart.yaml").read_text())
    spec["references"] = references
    path.write_text(yaml.safe_dump(spec))
    return path


MET = [
    {"metric": "efficiency", "where": {"ranks": 1}, "value": 1.0, "lower": 0.01, "upper": 0.01},
    {"metric": "images_per_s", "where": {"ranks": 2}, "value": 1.0, "lower": 0.0},
]
VIOLATED = [
    {"metric": "efficiency", "where": {"ranks": 1}, "value": 1.0, "lower": 0.01, "upper": 0.01},
    {
        "metric": "images_per_s",
        "where": {"ranks": 2},
        "value": 1e9,
        "lower": 0.1,
        "unit": "images/s",
    },
]


@pytest.fixture(scope="module")
def real(finished_quickstart: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One real 2-run campaign (1 and 2 ranks, Horovod timeline on): a copy of the session's
    finished quickstart, its collected results and cache removed so the tests collect it."""
    base = tmp_path_factory.mktemp("report")
    wd = base / "runs"
    shutil.copytree(finished_quickstart, wd, symlinks=True)
    for name in (".collect-cache.json", "results.parquet", "results.csv"):
        (wd / REAL / name).unlink(missing_ok=True)
    met = campaign_yaml(base / "met.yaml", MET)
    violated = campaign_yaml(base / "violated.yaml", VIOLATED)
    return {"wd": wd, "met": met, "violated": violated, "cdir": wd / REAL}


REAL_SECTIONS = (
    "Scaling results",
    "Scaling efficiency and communication overhead",
    "Compute / communication overlap",
    "Time to target",
    "Extrapolation (predictions)",
    "References",
    "Provenance",
)
ABSENT_SECTIONS = ("Tensor fusion", "Batch size", "CPU layouts", "FP16", "Hierarchical")


@pytest.mark.mpi
@pytest.mark.horovod
def test_report_of_a_real_campaign(real: dict[str, Path]) -> None:
    proc = hpcscale("report", REAL, "-w", str(real["wd"]), check=True)
    report_dir = real["cdir"] / "report"
    assert f"report: {report_dir / 'index.md'}" in proc.stdout
    assert f"report: {report_dir / 'index.html'}" in proc.stdout
    assert "Images/s" in proc.stdout and "Speedup" in proc.stdout
    md = (report_dir / "index.md").read_text()
    for title in REAL_SECTIONS:
        assert f"## {title}\n" in md, title
    for title in ABSENT_SECTIONS:
        assert f"## {title}" not in md, title
    tables = md_tables(md)
    assert len(tables) >= 7  # no time-to-target table (a GAN) nor predictions (two points)
    assert all(len(t) >= 3 for t in tables)  # every table has at least one row
    scaling = tables[0]
    assert len(scaling) == 4 and "Ranks" in scaling[0]  # two cells: 1 and 2 ranks
    pngs = sorted((report_dir / "figures").glob("*.png"))
    # A GAN has no default target, and two sizes cannot fit a 2-parameter law: neither figure.
    # Its losses per epoch and last sample grids are drawn
    # (tests/integration/test_report_training.py).
    assert {p.stem.split("-", 1)[1] for p in pngs} == {
        "throughput",
        "efficiency",
        "overlap",
        "learning_curves",
        "samples",
    }
    for png in pngs:
        assert f"](figures/{png.name})" in md
        check_png(png.read_bytes())
    html = (report_dir / "index.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(pngs)
    check_html(html)
    assert "Open MPI" in md and "0.28.1" in md  # provenance: MPI library, Horovod version


@pytest.mark.mpi
@pytest.mark.horovod
def test_check_passes_on_met_references(real: dict[str, Path], tmp_path: Path) -> None:
    proc = hpcscale(
        "report", str(real["met"]), "--check", "-w", str(real["wd"]), "--out", str(tmp_path / "r")
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "references: 2 of 2 passed" in proc.stdout


@pytest.mark.mpi
@pytest.mark.horovod
def test_check_fails_on_violated_reference(real: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r"
    proc = hpcscale(
        "report", str(real["violated"]), "--check", "-w", str(real["wd"]), "--out", str(out)
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL images_per_s[ranks=2]" in proc.stderr
    assert "efficiency[ranks=1]" not in proc.stderr  # only the failing one is listed
    assert "1 reference check(s) failed" in proc.stderr
    assert "references: 1 of 2 passed" in proc.stdout
    assert (out / "index.md").exists()  # the report is still written
    # Without --check the same violated reference is reported but does not fail the command.
    proc = hpcscale("report", str(real["violated"]), "-w", str(real["wd"]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.mpi
@pytest.mark.horovod
def test_every_campaign_csv_and_parquet(real: dict[str, Path], tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    shutil.copytree(real["wd"], wd, ignore=shutil.ignore_patterns("report"))
    proc = hpcscale("report", "-w", str(wd), "--format", "csv", "--format", "parquet", check=True)
    data = wd / REAL / "report" / "data"  # one campaign: its own report dir
    runs = pd.read_csv(data / f"{REAL}-runs.csv")
    assert len(runs) == 2 and (runs["images_per_s"] > 0).all()
    assert len(pd.read_parquet(data / f"{REAL}-runs.parquet")) == 2
    assert not (wd / REAL / "report" / "index.md").exists()
    assert "data: " in proc.stdout
    # Two campaigns (a copy of the first under another name): one report in <workdir>/report,
    # in name order ("qcopy" before "quickstart").
    shutil.copytree(wd / REAL, wd / "qcopy", ignore=shutil.ignore_patterns("report"))
    proc = hpcscale("report", "-w", str(wd), check=True)
    md = (wd / "report" / "index.md").read_text()
    assert "\n## qcopy\n" in md and f"\n## {REAL}\n" in md
    assert md.index("## qcopy") < md.index(f"## {REAL}")
    assert f"report: {wd / 'report' / 'index.html'}" in proc.stdout
    assert {p.name.split("-")[0] for p in (wd / "report" / "figures").glob("*.png")} == {
        "qcopy",
        REAL,
    }


@pytest.mark.mpi
@pytest.mark.horovod
def test_load_results_gives_the_tidy_table(real: dict[str, Path]) -> None:
    import hpcscale as api

    hpcscale("collect", REAL, "--timeline", "-w", str(real["wd"]), check=True)
    df = api.load_results(REAL, workdir=str(real["wd"]))
    assert len(df) == 2
    assert sorted(df["ranks"]) == [1, 2]
    assert (df["images_per_s"] > 0).all() and (df["epoch_time_s"] > 0).all()
    assert df.loc[df["ranks"] == 2, "comm_s"].iloc[0] > 0  # the timeline was collected


def test_unknown_campaign_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "wd" / "other" / "runs").mkdir(parents=True)
    proc = hpcscale("report", "nosuch", "-w", str(tmp_path / "wd"))
    assert proc.returncode == 2
    assert "no campaign 'nosuch'" in proc.stderr and "other" in proc.stderr
    proc = hpcscale("report", "-w", str(tmp_path / "empty"))
    assert proc.returncode == 2 and "no campaigns" in proc.stderr
