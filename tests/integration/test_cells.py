"""A cell is every setting that makes runs differ (issue 19): runs that differ in a workload
argument (`args.<name>`) or in `epochs` are separate cells, never repeats of one, and speedup
and efficiency are relative to the baseline that shares every setting but the scale.

Real parts: a real local campaign (the quickstart, made smaller, sweeping `args.lr`) submitted,
collected and reported through the CLI; the shipped `goyal_warmup` campaign planned and rendered
for real, its run directories then filled with that real campaign's metrics.json edited to
hand-chosen figures (no GPU cluster here), so every expected value below is computed by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from hpcscale import api
from hpcscale.analysis.baseline import group_keys
from hpcscale.analysis.compare import align, match_keys
from hpcscale.analysis.curves import learning_curves
from hpcscale.analysis.derive import derive
from hpcscale.analysis.references import check_references
from hpcscale.analysis.targets import campaign_targets
from hpcscale.collect.collector import frame_of
from hpcscale.formats.exit_record import write_exit_record
from hpcscale.model.vocab import CELL_FIELDS, cell_keys
from hpcscale.report.labels import group_labels
from tests.conftest import CAMPAIGNS, hpcscale

# -- cells and groups from the run table (hand-made rows) ---------------------------------------


def lr_runs() -> pd.DataFrame:
    """Two learning rates at 1 and 2 ranks, one run each. Throughput (images/s) by hand:
    lr 0.0002: 100 -> 150 (speedup 1.5, efficiency 0.75); lr 0.002: 80 -> 160 (2.0, 1.0)."""
    rows = []
    for lr, x1, x2 in ((0.0002, 100.0, 150.0), (0.002, 80.0, 160.0)):
        for ranks, x in ((1, x1), (2, x2)):
            rows.append(
                {
                    "run_id": f"lr{lr}-r{ranks}",
                    "model": "dcgan",
                    "scaling": "weak",
                    "device": "cpu",
                    "nodes": 1,
                    "tasks_per_node": ranks,
                    "batch_per_rank": 8,
                    "epochs": 1,
                    "images_per_s": x,
                    "epoch_time_s": 8 * ranks * 10 / x,
                    "args.lr": lr,
                }
            )
    return pd.DataFrame(rows)


def by_lr(cells: pd.DataFrame, column: str) -> dict[tuple[float, int], float]:
    return {(float(r["args.lr"]), int(r["ranks"])): float(r[column]) for _, r in cells.iterrows()}


def test_runs_differing_in_a_workload_argument_are_separate_cells() -> None:
    cells = derive(lr_runs(), "ranks")
    assert len(cells) == 4 and list(cells["repeats"]) == [1, 1, 1, 1]
    assert by_lr(cells, "speedup") == pytest.approx(
        {(0.0002, 1): 1.0, (0.0002, 2): 1.5, (0.002, 1): 1.0, (0.002, 2): 2.0}
    )
    assert by_lr(cells, "efficiency") == pytest.approx(
        {(0.0002, 1): 1.0, (0.0002, 2): 0.75, (0.002, 1): 1.0, (0.002, 2): 1.0}
    )
    assert cells["group"].nunique() == 2  # one group (baseline) per learning rate
    assert "args.lr" in group_keys("ranks", "weak", cells.columns)


def test_repeats_still_fold_and_epochs_split_cells() -> None:
    runs = lr_runs()
    again = runs.iloc[[0]].assign(run_id="again", repeat=1, images_per_s=120.0)
    longer = runs.iloc[[1]].assign(run_id="longer", epochs=2, images_per_s=300.0)
    cells = derive(pd.concat([runs, again, longer], ignore_index=True), "ranks")
    assert len(cells) == 5  # the repeat folds into its cell; 2 epochs is a cell of its own
    first = cells[(cells["args.lr"] == 0.0002) & (cells["ranks"] == 1)]
    assert list(first["repeats"]) == [2]
    assert first["images_per_s"].iloc[0] == pytest.approx(110.0)  # median of 100 and 120
    two = cells[cells["epochs"] == 2].iloc[0]
    assert two["repeats"] == 1 and two["images_per_s"] == pytest.approx(300.0)
    assert two["group"] not in set(cells.loc[cells["epochs"] == 1, "group"])


def test_cell_keys_are_every_run_field_but_the_repeat() -> None:
    from hpcscale.model.run import KNOB_DEFAULTS, Run

    derived = {"ranks", "gpus", "replicas"}
    # trace_window: the profiler's window ({skip, steps}), set only on traced torch runs and
    # kept in run.json; a campaign has one, so it never tells its cells apart
    bookkeeping = {"repeat", "args", "swept", "trace_window"}
    # a run's knobs are cell keys one by one, as the flat columns they are recorded in
    fields = (set(Run.model_fields) - {"knobs"}) | set(KNOB_DEFAULTS) | derived
    assert set(CELL_FIELDS) == fields - bookkeeping - {"replicas"}
    assert cell_keys(["nodes", "args.lr", "args.warmup_epochs"])[-2:] == (
        "args.lr",
        "args.warmup_epochs",
    )


def test_legends_name_the_argument_and_its_value() -> None:
    cells = derive(lr_runs(), "ranks")
    names = group_labels(cells)
    assert sorted(names.values()) == ["args.lr 0.0002", "args.lr 0.002"]


def test_compare_aligns_on_a_swept_argument() -> None:
    before = derive(lr_runs(), "ranks")
    later = lr_runs()
    later["images_per_s"] = later["images_per_s"] * 2  # this month's: twice as fast everywhere
    after = derive(later, "ranks")
    keys = match_keys({"a": before, "b": after}, "ranks")
    assert keys == ["args.lr"]
    rows, _ = align({"a": before, "b": after}, "ranks")
    assert rows["cell"].nunique() == 4
    b = rows[(rows["campaign"] == "b") & (rows["cell"] == "ranks=2, args.lr=0.002")]
    assert float(b["images_per_s"].iloc[0]) == pytest.approx(320.0)


def test_references_check_each_learning_rate_and_may_select_one() -> None:
    cells = derive(lr_runs(), "ranks")
    # efficiency at 2 ranks at least 0.8: 0.75 (lr 0.0002) fails, 1.0 (lr 0.002) passes
    results = check_references(
        cells, [{"metric": "efficiency", "where": {"ranks": 2}, "value": 1.0, "lower": 0.2}]
    )
    assert sorted((r.cell["args.lr"], r.passed) for r in results) == [
        (0.0002, False),
        (0.002, True),
    ]
    assert all("args.lr=" in r.message for r in results)
    one = check_references(
        cells,
        [{"metric": "speedup", "where": {"ranks": 2, "args.lr": 0.002}, "value": 2.0, "lower": 0}],
    )
    assert [(r.measured, r.passed) for r in one] == [(pytest.approx(2.0), True)]


def test_a_reference_may_select_on_an_argument_the_campaign_sets(tmp_path: Path) -> None:
    spec = yaml.safe_load((CAMPAIGNS / "quickstart.yaml").read_text())
    spec["matrix"]["args.lr"] = list(LRS)
    spec["references"] = [
        {"metric": "efficiency", "where": {"ranks": 2, "args.lr": 0.002}, "value": 1.0}
    ]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert len(api.plan(path).runs) == 4
    spec["references"][0]["where"] = {"args.lrr": 0.002}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2
    assert "[references[0].where.args.lrr]: unknown where key 'args.lrr'" in proc.stderr
    assert "did you mean 'args.lr'" in proc.stderr, proc.stderr


def test_learning_curves_and_plateau_are_per_cell() -> None:
    """Warm-up 5 reaches its plateau at epoch 4, warm-up 0 at epoch 3 (window 3, tolerance
    0.01: the first epoch opening three epochs within 0.01 of the best)."""
    acc = {5: [0.10, 0.30, 0.50, 0.70, 0.71, 0.71], 0: [0.20, 0.40, 0.60, 0.60, 0.60, 0.605]}
    rows = [
        {
            "run_id": f"w{w}",
            "model": "resnet50",
            "model_family": "cnn",
            "scaling": "weak",
            "device": "gpu",
            "nodes": 1,
            "tasks_per_node": 8,
            "gpus_per_node": 8,
            "batch_per_rank": 32,
            "epochs": 6,
            "epoch_time_s": 2.0,
            "epoch_times_s": [2.0] * 6,
            "images_per_s": 1000.0,
            "losses": None,
            "val_accuracy": acc[w],
            "args.warmup_epochs": w,
        }
        for w in (5, 0)
    ]
    cells, curves, _ = learning_curves(pd.DataFrame(rows))
    assert len(cells) == 2 and cells["group"].nunique() == 2
    assert list(cells["repeats"]) == [1, 1]
    for _, c in cells.iterrows():
        mine = curves[(curves["cell"] == c["cell"]) & (curves["metric"] == "val_accuracy")]
        assert list(mine["value"]) == pytest.approx(acc[int(c["args.warmup_epochs"])])
    found = campaign_targets(pd.DataFrame(rows)).cells
    plateau = dict(zip(found["args.warmup_epochs"], found["plateau_epoch"], strict=True))
    assert plateau == {5: 4.0, 0: 3.0}
    times = dict(zip(found["args.warmup_epochs"], found["time_to_plateau_s"], strict=True))
    assert times == {5: 8.0, 0: 6.0}


def test_tidy_frame_keeps_argument_columns_of_mixed_kinds(tmp_path: Path) -> None:
    rows = [
        {"run_id": "a", "args.lr": 0.1, "args.mode": 1},
        {"run_id": "b", "args.lr": 0.2, "args.mode": "auto"},
        {"run_id": "c", "args.lr": 0.2},
    ]
    df = frame_of(rows)
    assert list(df["args.lr"]) == [0.1, 0.2, 0.2]
    assert list(df["args.mode"])[:2] == ["1", "auto"] and pd.isna(df["args.mode"].iloc[2])
    df.to_parquet(tmp_path / "t.parquet")  # Parquet takes it
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert list(back["args.mode"])[:2] == ["1", "auto"]


# -- a real local campaign sweeping args.lr -----------------------------------------------------

LRS = (0.0002, 0.002)


@pytest.fixture(scope="session")
def lr_sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """campaigns/quickstart.yaml with `args.lr: [0.0002, 0.002]` in its matrix (2 layouts x 2
    learning rates = 4 runs), at the smallest size the DCGAN takes (1 epoch of 16-px images,
    8 steps), submitted with the local backend and collected: once per session."""
    base = tmp_path_factory.mktemp("lrsweep")
    spec = yaml.safe_load((CAMPAIGNS / "quickstart.yaml").read_text())
    spec["name"] = "lrsweep"
    spec["workload"]["epochs"] = 1
    spec["workload"]["args"] = {"image_size": 16, "dataset_size": 64, "burn_in_steps": 1}
    spec["matrix"]["batch"] = 8
    spec["matrix"]["args.lr"] = list(LRS)
    spec["collect"] = {"timeline": False}
    spec.pop("references", None)
    path = base / "lrsweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    wd = base / "runs"
    hpcscale("submit", str(path), "--backend", "local", "-w", str(wd), check=True, timeout=1800)
    hpcscale("collect", "lrsweep", "-w", str(wd), check=True, timeout=600)
    return {"wd": wd, "yaml": path, "cdir": wd / "lrsweep"}


def one_rank_run(cdir: Path) -> Path:
    for rd in sorted((cdir / "runs").iterdir()):
        if json.loads((rd / "run.json").read_text())["ranks"] == 1:
            return rd
    raise AssertionError(f"no 1-rank run in {cdir}")


def md_table(md: str, header_start: str) -> list[dict[str, str]]:
    """The first Markdown table whose header row starts with `header_start`, as dicts."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| " + header_start):
            head = [c.strip() for c in line.strip("|").split("|")]
            out = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip("|").split("|")]
                out.append(dict(zip(head, cells, strict=True)))
            return out
    raise AssertionError(f"no table starting {header_start!r}")


def number(text: str) -> float:
    return float(re.sub(r"[^0-9.eE+-]", "", text))


@pytest.mark.mpi
@pytest.mark.horovod
def test_real_lr_sweep_reports_four_cells_once_each(lr_sweep: dict[str, Path]) -> None:
    df = api.load_results("lrsweep", workdir=str(lr_sweep["wd"]))
    assert len(df) == 4
    assert sorted(df["args.lr"]) == pytest.approx(sorted(LRS * 2))
    assert list(df["epochs"]) == [1, 1, 1, 1]
    # Expected speedup and efficiency within each learning rate, from the tidy table's own
    # throughputs (weak scaling: X_2 / X_1 and X_2 / (2 X_1)).
    x = {(float(r["args.lr"]), int(r["ranks"])): float(r["images_per_s"]) for _, r in df.iterrows()}
    assert set(x) == {(lr, n) for lr in LRS for n in (1, 2)}

    out = lr_sweep["cdir"] / "report"
    hpcscale("report", "lrsweep", "-w", str(lr_sweep["wd"]), check=True, timeout=600)
    assert "4 run(s) in 4 matrix cell(s)" in (out / "index.md").read_text()
    rows = md_table((out / "index.md").read_text(), "Model")
    assert len(rows) == 4
    assert {r["Repeats"] for r in rows} == {"1"}
    assert sorted(number(r["args.lr"]) for r in rows) == pytest.approx(sorted(LRS * 2))
    for r in rows:
        lr, ranks = number(r["args.lr"]), int(number(r["Ranks"]))
        speedup = x[(lr, ranks)] / x[(lr, 1)]
        assert number(r["Speedup"]) == pytest.approx(speedup, rel=0.01), r
        assert number(r["Efficiency"]) == pytest.approx(speedup / ranks, rel=0.01), r
    # the throughput figure: one line per learning rate, named by its value
    rep = api.report("lrsweep", workdir=str(lr_sweep["wd"]), out=str(out)).reports[0]
    fig = next(p.figure for s in rep.sections for p in s.plots if p.key == "throughput")
    lines = {
        ln.get_label(): list(ln.get_ydata())
        for ax in fig.axes
        for ln in ax.get_lines()
        if ln.get_label().startswith("args.lr")
    }
    assert lines.keys() == {"args.lr 0.0002", "args.lr 0.002"}
    for label, ys in lines.items():
        lr = float(label.split()[-1])
        assert ys == pytest.approx([x[(lr, 1)], x[(lr, 2)]])


# -- the shipped goyal_warmup campaign: warm-up 5 and 0 ------------------------------------------

WARMUPS = (5, 0)
NODES = (1, 2, 4, 8)
STEPS = 10  # per epoch, in the edited metrics
EPOCHS = 6
# Throughput (images/s) by hand: speedup X_N / X_1 and efficiency X_N / (N X_1) per warm-up.
THROUGHPUT = {
    5: {1: 1000.0, 2: 1900.0, 4: 3600.0, 8: 6400.0},  # speedup 1.9, 3.6, 6.4
    0: {1: 1000.0, 2: 1800.0, 4: 3200.0, 8: 5600.0},  # speedup 1.8, 3.2, 5.6
}
SPEEDUP = {5: {1: 1.0, 2: 1.9, 4: 3.6, 8: 6.4}, 0: {1: 1.0, 2: 1.8, 4: 3.2, 8: 5.6}}
EFFICIENCY = {5: {1: 1.0, 2: 0.95, 4: 0.9, 8: 0.8}, 0: {1: 1.0, 2: 0.9, 4: 0.8, 8: 0.7}}
# Validation accuracy per epoch; plateau (window 3, tolerance 0.01): epoch 4 with the warm-up,
# epoch 3 without (the same at every size).
VAL_ACCURACY = {5: [0.10, 0.30, 0.50, 0.70, 0.71, 0.71], 0: [0.20, 0.40, 0.60, 0.60, 0.60, 0.605]}
PLATEAU = {5: 4, 0: 3}


def test_plan_shows_each_warmup_as_its_own_runs() -> None:
    proc = hpcscale("plan", str(CAMPAIGNS / "goyal_warmup.yaml"), "--json", check=True)
    records = json.loads(proc.stdout)
    assert sorted((r["nodes"], r["args"]["warmup_epochs"]) for r in records) == sorted(
        (n, w) for n in NODES for w in WARMUPS
    )
    assert len({r["run_id"] for r in records}) == 8
    text = hpcscale("plan", str(CAMPAIGNS / "goyal_warmup.yaml"), check=True).stdout
    assert "args.warmup_epochs" in text
    assert re.search(r"args\.warmup_epochs\s+5: 4, 0: 4", text), text


def goyal_metrics(template: dict[str, Any], run: dict[str, Any], start: float) -> dict[str, Any]:
    """A real metrics.json rewritten to one goyal_warmup run at the hand-chosen figures."""
    n, w = run["nodes"], run["args"]["warmup_epochs"]
    images = run["global_batch"] * STEPS
    rate = THROUGHPUT[w][n]
    epoch_s = images / rate
    acc = VAL_ACCURACY[w]
    loss = [round(2.0 - a, 3) for a in acc]
    m = dict(template)
    m.update(
        workload="cnn",
        model="resnet50",
        ranks=run["ranks"],
        replicas=run["replicas"],
        batch_per_rank=run["batch_per_rank"],
        global_batch=run["global_batch"],
        epochs=EPOCHS,
        steps_per_epoch=STEPS,
        dataset_size=images,
        data="synthetic",
        image_size=224,
        num_classes=1000,
        device="gpu",
        threads=None,
        lr=0.1,
        lr_scaled=0.1 * run["global_batch"] / 256,
        warmup_epochs=float(w),
        epoch_time_s=[epoch_s] * EPOCHS,
        epoch_cpu_s=None,
        images_per_s=[rate] * EPOCHS,
        fit_time_s=epoch_s * EPOCHS,
        losses={"loss": loss},
        train_loss=loss,
        train_accuracy=acc,
        val_loss=loss,
        val_accuracy=acc,
        val_time_s=None,
        params={"resnet50": {"total": 25557032, "trainable": 25503912}},
        param_count=25557032,
        started_unix_s=start,
        finished_unix_s=start + epoch_s * EPOCHS + 1,
        load=None,
    )
    return m


@pytest.fixture(scope="module")
def goyal(lr_sweep: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """campaigns/goyal_warmup.yaml with 6 epochs, rendered; each run directory then holds a
    real finished run's metrics.json (the lr sweep's 1-rank run) rewritten to that run's
    figures."""
    base = tmp_path_factory.mktemp("goyal")
    text = (CAMPAIGNS / "goyal_warmup.yaml").read_text()
    path = base / "goyal_warmup.yaml"
    assert "  epochs: 90\n" in text  # the shipped campaign's 90 epochs, made 6 here
    path.write_text(text.replace("  epochs: 90\n", f"  epochs: {EPOCHS}\n"))
    wd = base / "runs"
    hpcscale("render", str(path), "-w", str(wd), check=True)
    template = json.loads((one_rank_run(lr_sweep["cdir"]) / "metrics.json").read_text())
    runs = sorted((wd / "goyal_warmup" / "runs").iterdir())
    assert len(runs) == 8
    for i, rd in enumerate(runs):
        run = json.loads((rd / "run.json").read_text())
        metrics = goyal_metrics(template, run, 1.8e9 + 1000 * i)
        (rd / "metrics.json").write_text(json.dumps(metrics))
        write_exit_record(rd, 0)  # it completed, as its job script would have recorded
    return wd


@pytest.mark.mpi
@pytest.mark.horovod
def test_goyal_report_keeps_warmup_5_and_0_apart(goyal: Path) -> None:
    hpcscale("collect", "goyal_warmup", "-w", str(goyal), check=True)
    df = api.load_results("goyal_warmup", workdir=str(goyal))
    assert sorted(df["args.warmup_epochs"]) == [0, 0, 0, 0, 5, 5, 5, 5]
    assert set(df["epochs"]) == {EPOCHS}
    hpcscale("report", "goyal_warmup", "-w", str(goyal), check=True)
    md = (goyal / "goyal_warmup" / "report" / "index.md").read_text()
    assert "8 run(s) in 8 matrix cell(s)" in md
    rows = md_table(md, "Model")
    assert len(rows) == 8 and {r["Repeats"] for r in rows} == {"1"}
    for r in rows:
        w, n = int(number(r["args.warmup_epochs"])), int(number(r["Nodes"]))
        assert number(r["Speedup"]) == pytest.approx(SPEEDUP[w][n], abs=0.01), r
        assert number(r["Efficiency"]) == pytest.approx(EFFICIENCY[w][n], abs=0.01), r
        assert number(r["Images/s"]) == pytest.approx(THROUGHPUT[w][n], rel=0.01), r
    final = md_table(md[md.index("## Learning curves") :], "Model")
    assert len(final) == 8
    assert {(int(number(r["args.warmup_epochs"])), r["Plateau epoch"]) for r in final} == {
        (5, "4"),
        (0, "3"),
    }

    rep = api.report("goyal_warmup", workdir=str(goyal)).reports[0]
    plots = {p.key: p for s in rep.sections for p in s.plots}
    # throughput: one line per warm-up, its value in the legend, its own throughputs
    drawn = {
        ln.get_label(): list(ln.get_ydata())
        for ax in plots["throughput"].figure.axes
        for ln in ax.get_lines()
        if ln.get_label().startswith("args.")
    }
    assert drawn == {
        f"args.warmup_epochs {w}": pytest.approx([THROUGHPUT[w][n] for n in NODES]) for w in WARMUPS
    }
    # learning curves: one figure per warm-up, titled with it
    titles = sorted(p.title for p in plots.values() if p.key.startswith("learning_curves"))
    assert titles == [f"Learning curves per epoch: args.warmup_epochs {w}" for w in (0, 5)]
    # epochs to plateau: one line per warm-up
    plateau = {
        ln.get_label(): list(ln.get_ydata())
        for ax in plots["epochs_to_plateau"].figure.axes
        for ln in ax.get_lines()
        if ln.get_label().startswith("args.")
    }
    assert plateau == {f"args.warmup_epochs {w}": [PLATEAU[w]] * 4 for w in WARMUPS}
