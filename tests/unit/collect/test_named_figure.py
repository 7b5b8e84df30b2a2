"""A command's figure is collected under its own name only (#30): results.csv of a command
campaign has `samples_per_s`, nothing in `images_per_s`, a `framework` column and no framework
knob it left at its defaults; a table collected before (its figure copied into images_per_s)
loads as today's. Expected values are what the outputs below print, and hand arithmetic."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from hpcscale.analysis.derive import derive
from hpcscale.collect.collector import collect_campaign, load_results
from hpcscale.collect.table import RESULTS_PARQUET
from hpcscale.formats.exit_record import write_exit_record
from tests.conftest import hpcscale

BODY = """\
name: named
workload:
  command: python p.py
  metrics:
    - {name: samples_per_s, pattern: 'rate ([\\d.]+)', unit: samples/s}
  throughput: samples_per_s
system: local
scaling: weak
matrix: {layout: ["1x1", "2x1"], batch: 4}
"""
RATE = {1: 25.0, 2: 45.0}  # what each size's run prints


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rendered command campaign whose runs' outputs are written as finished runs' would be."""
    tmp = tmp_path_factory.mktemp("named")
    (tmp / "p.py").write_text("import sys\n")  # never run
    (tmp / "c.yaml").write_text(textwrap.dedent(BODY))
    hpcscale("render", str(tmp / "c.yaml"), "-w", str(tmp / "wd"), check=True)
    cdir = tmp / "wd" / "named"
    for run in (p for p in (cdir / "runs").iterdir() if p.is_dir()):
        ranks = json.loads((run / "run.json").read_text())["ranks"]
        (run / "local.out").write_text(f"rate {RATE[ranks]}\n")
        write_exit_record(run, 0)  # it completed, as its job script would have recorded
    collect_campaign(cdir, progress=False)
    return cdir


def test_the_figure_is_under_its_own_name_and_the_row_names_its_framework(
    collected: Path,
) -> None:
    df = load_results(collected).sort_values("ranks")
    assert list(df["samples_per_s"]) == [25.0, 45.0]
    assert df["images_per_s"].isna().all() and df["epoch_time_s"].isna().all()
    assert set(df["framework"]) == {"command"} and set(df["strategy"]) == {""}
    knobs = {"fusion_threshold_mb", "cycle_time_ms", "fp16_allreduce", "hierarchical_allreduce"}
    assert knobs.isdisjoint(pd.read_csv(collected / "results.csv").columns)
    got = collect_campaign(collected, progress=False)
    cells = derive(df, metric=got.metric).set_index("ranks")
    assert cells.loc[2, "speedup"] == pytest.approx(45.0 / 25.0)
    assert cells.loc[2, "efficiency"] == pytest.approx(45.0 / (2 * 25.0))


def test_a_table_collected_before_loads_with_the_copy_undone(
    collected: Path, tmp_path: Path
) -> None:
    """Collector 16 copied the figure into images_per_s and wrote no `framework` column."""
    old = pd.read_parquet(collected / RESULTS_PARQUET).drop(columns="framework")
    old["images_per_s"] = old["samples_per_s"]
    old.to_parquet(tmp_path / RESULTS_PARQUET, index=False)
    df = load_results(tmp_path).sort_values("ranks")
    assert df["images_per_s"].isna().all()
    assert list(df["samples_per_s"]) == [25.0, 45.0]
    assert set(df["framework"]) == {"command"}
    assert not math.isnan(derive(df, metric="samples_per_s")["speedup"].max())


def test_every_column_hpcscale_writes_is_a_name_no_metric_may_take(collected: Path) -> None:
    """The reserved names are kept true against a real collected table and its cells: each
    column beside the program's own metric is reserved, a contract column a program may fill,
    or an interval/baseline column of one of them (a metric named like any would be
    overwritten: its speedup table would hold the speedups)."""
    from hpcscale.model.command import CONTRACT, FILLED, RESERVED
    from hpcscale.model.metrics import reserved_problem

    df = load_results(collected)
    cells = derive(df)
    own = {"samples_per_s"}
    for column in (set(df.columns) | set(cells.columns)) - own:
        if column in CONTRACT:
            continue
        why = reserved_problem(column, RESERVED, FILLED | own)
        assert why is not None, f"{column}: written by hpcscale, but a metric may take its name"


@pytest.mark.parametrize("name", ["scale", "speedup", "group", "nodes", "repeats", "comm_s_min"])
def test_a_metric_named_like_a_column_hpcscale_writes_is_refused(tmp_path: Path, name: str) -> None:
    """End to end before this check: a metric `scale` of 25 and 45 samples/s reported 1 and 2
    with speedup 0.04 (the cell's scale column overwrote it)."""
    body = BODY.replace("name: samples_per_s,", f"name: {name},")
    (tmp_path / "c.yaml").write_text(
        body.replace("throughput: samples_per_s", f"throughput: {name}")
    )
    proc = hpcscale("validate", str(tmp_path / "c.yaml"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "c.yaml:5 [workload.metrics[0]]" in proc.stderr and repr(name) in proc.stderr


def test_an_ordinary_metric_name_stays_allowed(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("import sys\n")
    for name in ("samples_per_s_lo", "step_ms", "images_per_s", "tokens_per_s"):
        body = BODY.replace("name: samples_per_s,", f"name: {name},")
        (tmp_path / "c.yaml").write_text(
            body.replace("throughput: samples_per_s", f"throughput: {name}")
        )
        assert hpcscale("validate", str(tmp_path / "c.yaml")).returncode == 0, name


def test_rows_of_two_metrics_are_not_derived_on_one(collected: Path) -> None:
    """Two command campaigns in one table (a notebook's concat) or a command's rows beside a
    bundled program's: one metric for all left the others' speedups empty without a word."""
    from hpcscale.model.errors import UsageError

    df = load_results(collected)
    other = df.assign(
        figure_metric="tokens_per_s", tokens_per_s=df["samples_per_s"] * 10, campaign="other"
    )
    with pytest.raises(UsageError, match="samples_per_s, tokens_per_s"):
        derive(pd.concat([df, other], ignore_index=True))
    bundled = df.assign(command=None, figure_metric=None, images_per_s=[10.0, 19.0])
    with pytest.raises(UsageError, match="bundled"):
        derive(pd.concat([df, bundled], ignore_index=True))
    # named, it is what the caller chose; alone, each derives as before
    cells = derive(pd.concat([df, other], ignore_index=True), metric="samples_per_s")
    assert len(cells) >= 2 and sorted(derive(other)["speedup"].dropna()) == [1.0, 1.8]
