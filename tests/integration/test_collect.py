"""`hpcscale collect` and `load_results` on a campaign directory made from real runs.

The runs are real (tests/timeline_fixture.py: jobs/tf/train.py at np=2 under mpirun and
horovodrun --gloo); the campaign directory around them is assembled here, with `run.json` from
the real `Run` model, because rendering and submitting are other modules' job (and tests).
Broken runs are made by damaging copies of real files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hpcscale.analysis import (
    EXACT_COLUMNS,
    LIST_COLUMNS,
    METRIC_COLUMNS,
    RUN_COLUMNS,
    TIMELINE_COLUMNS,
)
from hpcscale.analysis.frame import normalise
from hpcscale.collect.collector import (
    CACHE_FILE,
    RESULTS_CSV,
    RESULTS_PARQUET,
    collect,
    collect_campaign,
    frame_of,
    load_results,
)
from hpcscale.collect.split import load_steps
from hpcscale.collect.traces.horovod import parse_timeline
from hpcscale.formats.exit_record import write_exit_record
from hpcscale.formats.run_record import encode_run_record
from hpcscale.model.run import Run
from tests.conftest import hpcscale
from tests.timeline_fixture import RealRuns, real_runs_fixture  # noqa: F401  (fixture)

pytestmark = [pytest.mark.horovod, pytest.mark.mpi]


def _run(repeat: int, mpi: str = "openmpi") -> Run:
    return Run(
        campaign="demo", system="local", model="dcgan", scaling="weak",
        device="cpu", nodes=1, tasks_per_node=2, threads_per_task=1, gpus_per_node=0,
        batch_per_rank=4, global_batch=8, mpi=mpi, epochs=2, timeline=True, repeat=repeat,
    )  # fmt: skip


def _place(campaign: Path, run: Run, src: Path | None) -> Path:
    d = campaign / "runs" / run.run_id
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(run.as_record()))
    if src is not None:
        for name in ("metrics.json", "steps.json", "timeline.json"):
            if (src / name).exists():
                shutil.copy2(src / name, d / name)
        write_exit_record(d, 0)  # it completed, as its job script would have recorded
    return d


@pytest.fixture
def campaign(real_runs: RealRuns, tmp_path: Path) -> dict[str, Path]:
    wd = tmp_path / "wd"
    c = wd / "demo"
    dirs = {
        "mpi": _place(c, _run(0), real_runs.mpi),
        "gloo": _place(c, _run(1, mpi="gloo"), real_runs.gloo),
        "corrupt": _place(c, _run(2), real_runs.mpi),
        "unfinished": _place(c, _run(3), None),
        "empty_timeline": _place(c, _run(4), real_runs.mpi),
    }
    metrics = dirs["corrupt"] / "metrics.json"
    metrics.write_bytes(metrics.read_bytes()[:100])
    (dirs["empty_timeline"] / "timeline.json").write_bytes(b"")
    (c / "campaign.yaml").write_text("name: demo\n")
    return {"wd": wd, "dir": c, **dirs}


def test_collect_gathers_one_row_per_finished_run(campaign: dict[str, Path]) -> None:
    res = collect_campaign(campaign["dir"], timeline=True, progress=False)
    ids = {d.name for k, d in campaign.items() if k in ("mpi", "gloo", "empty_timeline")}
    assert {r["run_id"] for r in res.rows} == ids
    assert res.unfinished == [campaign["unfinished"].name]
    errors = {p.run_id: p.reason for p in res.problems if not p.partial}
    assert list(errors) == [campaign["corrupt"].name]
    assert "metrics.json" in errors[campaign["corrupt"].name]
    notes = [p.reason for p in res.problems if p.run_id == campaign["empty_timeline"].name]
    assert any("no collectives recorded" in n for n in notes)
    assert (campaign["dir"] / RESULTS_PARQUET).exists() and (campaign["dir"] / RESULTS_CSV).exists()


def test_rows_follow_the_analysis_contract(campaign: dict[str, Path]) -> None:
    df = collect(campaign["dir"], timeline=True, progress=False)
    for col in (*RUN_COLUMNS, *METRIC_COLUMNS, *LIST_COLUMNS, *TIMELINE_COLUMNS, *EXACT_COLUMNS):
        assert col in df.columns, col
    out = normalise(df)  # the analysis helper's own check of the contract
    assert len(out) == 3
    row = df.set_index("run_id").loc[campaign["mpi"].name]
    metrics = json.loads((campaign["mpi"] / "metrics.json").read_text())
    assert row["epoch_time_s"] == pytest.approx(sum(metrics["epoch_time_s"]) / 2)
    assert row["epoch_times_s"] == metrics["epoch_time_s"]
    assert row["losses"] == metrics["losses"]
    # Timeline figures are per timed epoch: the timeline clipped to the steps' window.
    steps = load_steps(campaign["mpi"] / "steps.json")
    s = parse_timeline(campaign["mpi"] / "timeline.json", window_unix_us=steps.window_unix_us())
    assert row["comm_s"] == pytest.approx(s.seconds("comm") / 2)
    assert row["allreduce_bytes_per_step"] == pytest.approx(s.allreduce_bytes / 6)
    assert row["exact_overlap_s"] + row["exact_exposed_comm_s"] == pytest.approx(row["comm_s"])
    assert row["exact_compute_s"] > 0 and row["bus_bandwidth_gbs"] > 0
    empty = df.set_index("run_id").loc[campaign["empty_timeline"].name]
    assert empty["comm_s"] == 0.0


def test_without_timeline_the_timeline_columns_are_empty(campaign: dict[str, Path]) -> None:
    df = collect(campaign["dir"], timeline=False, progress=False)
    assert df["comm_s"].isna().all() and df["epoch_time_s"].notna().all()


def test_collect_is_incremental(campaign: dict[str, Path]) -> None:
    first = collect_campaign(campaign["dir"], timeline=True, progress=False)
    assert (first.new, first.cached) == (5, 0)
    # Runs that could not be read (corrupt, unfinished) are read again every time.
    unreadable = 5 - len(first.rows)
    assert unreadable == len([p for p in first.problems if not p.partial]) + len(first.unfinished)
    again = collect_campaign(campaign["dir"], timeline=True, progress=False)
    assert (again.new, again.cached) == (unreadable, 5 - unreadable)
    pd.testing.assert_frame_equal(frame_of(again.rows), frame_of(first.rows))
    # A run whose files change is read again, and only that one.
    metrics = campaign["gloo"] / "metrics.json"
    data = json.loads(metrics.read_text())
    data["fit_time_s"] = 123.0
    metrics.write_text(json.dumps(data))
    st = metrics.stat()
    os.utime(metrics, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    third = collect_campaign(campaign["dir"], timeline=True, progress=False)
    assert (third.new, third.cached) == (1 + unreadable, 4 - unreadable)
    df = load_results(str(campaign["dir"]))
    assert df.set_index("run_id").loc[campaign["gloo"].name, "fit_time_s"] == 123.0
    # Asking for timelines after a metrics-only collect reads the runs again.
    (campaign["dir"] / CACHE_FILE).unlink()
    collect_campaign(campaign["dir"], timeline=False, progress=False)
    fourth = collect_campaign(campaign["dir"], timeline=True, progress=False)
    assert fourth.new == 5


def test_load_results_round_trips_lists_and_dicts(campaign: dict[str, Path]) -> None:
    df = collect(campaign["dir"], timeline=True, progress=False)
    back = load_results("demo", workdir=str(campaign["wd"]))
    assert list(back["run_id"]) == list(df["run_id"])
    for a, b in zip(df["losses"], back["losses"], strict=True):
        assert a == b
    assert all(isinstance(v, list) for v in back["epoch_times_s"])
    csv = pd.read_csv(campaign["dir"] / RESULTS_CSV)
    assert json.loads(csv["epoch_times_s"][0]) == df["epoch_times_s"][0]


def test_collect_command(campaign: dict[str, Path]) -> None:
    wd = str(campaign["wd"])
    proc = hpcscale("collect", "demo", "--timeline", "--json", "--workdir", wd)
    # exit 1: the corrupt run finished but cannot be read (named); the others are written
    assert proc.returncode == 1 and campaign["corrupt"].name in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)["campaigns"][0]
    assert len(out["rows"]) == 3 and out["unfinished"] == [campaign["unfinished"].name]
    assert any(p["run_id"] == campaign["corrupt"].name for p in out["problems"])
    # No CAMPAIGN: every campaign in the workdir; a YAML path: its `name:` gives the directory.
    table = hpcscale("collect", "--timeline", "--workdir", wd)
    assert table.returncode == 1 and "demo: 3 runs" in table.stdout
    assert campaign["corrupt"].name in table.stderr
    by_yaml = hpcscale("collect", str(campaign["dir"] / "campaign.yaml"), "--workdir", wd)
    assert by_yaml.returncode == 1, by_yaml.stderr
    missing = hpcscale("collect", "nope", "--workdir", wd)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    # trace finds a run by id prefix in the workdir
    out = campaign["wd"] / "merged.json"
    proc = hpcscale("trace", campaign["mpi"].name[:6], "--out", str(out), "--workdir", wd)
    assert proc.returncode == 0, proc.stderr
    assert any(e.get("cat") == "step" for e in json.loads(out.read_text()))


def test_load_results_before_collect_is_a_usage_error(tmp_path: Path) -> None:
    from hpcscale.model.errors import UsageError

    with pytest.raises(UsageError):
        load_results("demo", workdir=str(tmp_path))


def test_run_json_new_old_and_foreign(campaign: dict[str, Path]) -> None:
    """run.json as render writes it now (schema_version first) and as it did before (none) are
    both collected; a foreign run.json is a problem naming the file and what is wrong."""
    run_json = campaign["mpi"] / "run.json"
    record = json.loads(run_json.read_text())
    run_json.write_bytes(encode_run_record(record))
    foreign = campaign["dir"] / "runs" / "zz-foreign"
    foreign.mkdir()
    (foreign / "run.json").write_text('{"name": "not a run"}')
    res = collect_campaign(campaign["dir"], timeline=False, progress=False)
    ids = {r["run_id"] for r in res.rows}
    assert {campaign["mpi"].name, campaign["gloo"].name} <= ids  # new and old format
    errors = {p.run_id: p.reason for p in res.problems if not p.partial}
    assert str(foreign / "run.json") in errors["zz-foreign"]
    assert "not an hpcscale run record" in errors["zz-foreign"]
