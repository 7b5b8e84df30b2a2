"""An edited campaign: runs its matrix no longer has are stale (kept, left out of status, collect
and report unless --include-stale), every version of the campaign file is kept, and a copied
workdir's ledger points into the copy. No training: run directories come from `render`, ledger
rows from the ledger's own writes (as `submit` makes them), metrics.json from its format."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

import hpcscale.api as hs
from hpcscale.backends.base import QuietReporter
from hpcscale.formats.metrics import encode_metrics, metrics_from_dict
from hpcscale.formats.run_record import campaign_version_of, load_run_record
from hpcscale.model.run import Run
from hpcscale.render.render import Rendered, keep_version
from hpcscale.state.ledger import Ledger
from hpcscale.state.states import RunState
from tests.conftest import CAMPAIGNS, hpcscale

NAME = "dcgan_strong"


def _campaign(tmp_path: Path, nodes: str = "[1, 2, 4, 8]") -> Path:
    """campaigns/dcgan_strong.yaml (4 runs), with its nodes axis as given."""
    text = (CAMPAIGNS / "dcgan_strong.yaml").read_text()
    assert "nodes: [1, 2, 4, 8]" in text
    path = tmp_path / "dcgan_strong.yaml"
    path.write_text(text.replace("nodes: [1, 2, 4, 8]", f"nodes: {nodes}"))
    return path


def _finish(run: Run, run_dir: Path) -> None:
    """A valid metrics.json, as a finished job leaves it (strong scaling: time / ranks)."""
    epoch_s = 8.0 / run.ranks
    steps = 4
    metrics = metrics_from_dict(
        {
            "schema_version": 1,
            "workload": "gan",
            "model": run.model,
            "strategy": run.strategy,
            "cross_device_ops": None,
            "ranks": run.ranks,
            "replicas": run.replicas,
            "batch_per_rank": run.batch_per_rank,
            "global_batch": run.global_batch,
            "epochs": 1,
            "steps_per_epoch": steps,
            "dataset_size": run.global_batch * steps,
            "data": "synthetic",
            "image_size": 64,
            "num_classes": None,
            "device": run.device,
            "threads": None,
            "fp16_allreduce": False,
            "mixed_precision": None,
            "timeline": False,
            "lr": 0.0002,
            "lr_scaled": 0.0002,
            "warmup_epochs": 0.0,
            "burn_in_steps": 0,
            "burn_in_s": 0.0,
            "epoch_time_s": [epoch_s],
            "images_per_s": [run.global_batch * steps / epoch_s],
            "fit_time_s": epoch_s,
            "losses": {"g": [1.0], "d": [1.0]},
            "accuracy": None,
            "step_time": {"count": 4, "mean_ms": 1.0, "p50_ms": 1.0, "p90_ms": 1.0, "p99_ms": 1.0},
            "params": {"generator": {"total": 10, "trainable": 10}},
            "param_count": 10,
            "sync_check": None,
            "started_unix_s": 1.0,
            "finished_unix_s": 2.0,
            "provenance": {
                "python": "3",
                "tensorflow": "2",
                "keras": "3",
                "horovod": None,
                "mpi": None,
                "hostnames": ["here"],
                "env": {},
                "git_revision": None,
                "git_dirty": None,
                "argv": [],
            },
        }
    )
    (run_dir / "metrics.json").write_bytes(encode_metrics(metrics))


def _submitted(rendered: list[Rendered], cdir: Path, running: str | None = None) -> None:
    """The ledger rows a local submit leaves: each run registered (as `submit` does), every
    run completed with its metrics.json, except `running`, still running in this process."""
    with Ledger(cdir) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered)
        for r in rendered:
            if r.run.run_id == running:
                ledger.update(
                    r.run.run_id, RunState.RUNNING, backend="local", runner_pid=os.getpid()
                )
            else:
                _finish(r.run, r.run_dir)
                ledger.update(r.run.run_id, RunState.COMPLETED, backend="local", exit_code="0")


def test_an_edited_campaign_leaves_its_old_runs_out(tmp_path: Path, workdir: Path) -> None:
    """The issue's case: dcgan_strong rendered (4 runs), edited to `nodes: [1, 2]`, rendered
    again. Before, collect read 4 runs and the report mixed both matrices."""
    path = _campaign(tmp_path)
    first_text = path.read_text()
    first = hs.render(path)
    cdir = first.directory
    by_nodes = {r.run.nodes: r.run.run_id for r in first.runs}
    _submitted(first.runs, cdir, running=by_nodes[8])  # the 8-node run is still running
    path.write_text(path.read_text().replace("nodes: [1, 2, 4, 8]", "nodes: [1, 2]"))
    second = hs.render(path)
    assert {r.run.run_id for r in second.runs} == {by_nodes[1], by_nodes[2]}
    old = {by_nodes[4], by_nodes[8]}

    with Ledger(cdir) as ledger:
        assert {r.run_id for r in ledger.rows() if r.stale} == old
        assert "stale: no longer in the campaign's matrix" in str(ledger.history(by_nodes[4]))

    # status: the current matrix, and the stale run that is still running (said to be stale)
    [st] = hs.status(NAME)
    assert [r.run_id for r in st.rows] == [by_nodes[1], by_nodes[2], by_nodes[8]]
    [warning, hidden] = st.warnings  # the stale run still running; the one hidden (4 nodes)
    assert "1 stale run(s) hidden" in hidden and "--include-stale" in hidden
    assert "1 stale run(s)" in warning and by_nodes[8] in warning
    assert f"hpcscale cancel {NAME} --where stale" in warning
    assert hs.select(st.rows, "stale") == [r for r in st.rows if r.run_id == by_nodes[8]]
    [every] = hs.status(NAME, include_stale=True)
    assert {r.run_id: r.stale for r in every.rows} == {rid: rid in old for rid in by_nodes.values()}

    # collect: only the current matrix, the stale runs named
    [res] = hs.collect(NAME)
    assert sorted(row["run_id"] for row in res.rows) == sorted([by_nodes[1], by_nodes[2]])
    assert sorted(res.stale) == sorted(old) and res.unfinished == []
    assert len(hs.load_results(NAME)) == 2
    [res] = hs.collect(NAME, include_stale=True)
    assert {row["run_id"]: row["stale"] for row in res.rows} == {
        by_nodes[1]: False,
        by_nodes[2]: False,
        by_nodes[4]: True,
    }
    assert res.unfinished == [by_nodes[8]]

    # report: the current matrix, saying how many were left out
    out = hs.report(NAME, out=tmp_path / "report")
    [rep] = out.reports
    assert sorted(rep.runs["run_id"]) == sorted([by_nodes[1], by_nodes[2]])
    md = (tmp_path / "report" / "index.md").read_text()
    assert "2 stale run(s), no longer in the campaign's matrix" in md and "left out" in md
    v1, v2 = (campaign_version_of(t) for t in (first_text, path.read_text()))
    assert f"{v2}.yaml (2 run(s))" in md and v1 not in md  # provenance: these runs only
    out = hs.report(NAME, out=tmp_path / "all", include_stale=True)
    finished = {by_nodes[1], by_nodes[2], by_nodes[4]}  # the 8-node run has no metrics yet
    assert set(out.reports[0].runs["run_id"]) == finished
    md = (tmp_path / "all" / "index.md").read_text()
    assert "included (--include-stale)" in md and f"{v1}.yaml (2 run(s))" in md


def test_every_version_of_the_campaign_file_is_kept(tmp_path: Path, workdir: Path) -> None:
    """versions/<sha256[:12]>.yaml per version, never rewritten; each run.json names the
    version that rendered it, and run ids do not change for it."""
    path = _campaign(tmp_path)
    v1_text = path.read_text()
    first = hs.render(path)
    cdir = first.directory
    v1 = campaign_version_of(v1_text)
    kept = cdir / "versions" / f"{v1}.yaml"
    assert kept.read_text() == v1_text
    stat1 = kept.stat()
    for r in first.runs:
        rec = load_run_record(r.run_dir / "run.json")
        assert rec.campaign_version == v1 and rec.run_id == r.run.run_id
        assert Rendered.from_run_dir(r.run_dir).run.run_id == r.run.run_id  # id re-derives

    path.write_text(v1_text.replace("nodes: [1, 2, 4, 8]", "nodes: [1, 2]"))
    second = hs.render(path)
    v2 = campaign_version_of(path.read_text())
    assert sorted(p.name for p in (cdir / "versions").iterdir()) == sorted(
        [f"{v1}.yaml", f"{v2}.yaml"]
    )
    assert (cdir / "campaign.yaml").read_text() == path.read_text()
    for r in second.runs:
        assert load_run_record(r.run_dir / "run.json").campaign_version == v2
    dropped = {r.run.run_id for r in first.runs} - {r.run.run_id for r in second.runs}
    for rid in dropped:  # left as v1 rendered them
        assert load_run_record(cdir / "runs" / rid / "run.json").campaign_version == v1

    path.write_text(v1_text)  # back to the first version: its file is not written again
    hs.render(path)
    after = kept.stat()
    assert (after.st_ino, after.st_mtime_ns) == (stat1.st_ino, stat1.st_mtime_ns)
    assert len(list((cdir / "versions").iterdir())) == 2


def test_runs_that_come_back_are_not_stale(tmp_path: Path, workdir: Path) -> None:
    path = _campaign(tmp_path)
    first = hs.render(path)
    _submitted(first.runs, first.directory)
    path.write_text(path.read_text().replace("nodes: [1, 2, 4, 8]", "nodes: [1]"))
    hs.render(path)
    assert len(hs.status(NAME)[0].rows) == 1
    path.write_text(path.read_text().replace("nodes: [1]", "nodes: [1, 2, 4, 8]"))
    hs.render(path)
    [st] = hs.status(NAME)
    assert len(st.rows) == 4 and not any(r.stale for r in st.rows) and st.warnings == []
    assert len(hs.collect(NAME)[0].rows) == 4
    with Ledger(first.directory) as ledger:
        assert "back in the campaign's matrix" in str(ledger.history(first.runs[-1].run.run_id))


def test_rendered_never_submitted_runs_that_fall_out_are_stale(
    tmp_path: Path, workdir: Path
) -> None:
    """No ledger at all: the run.json of a run the latest render did not write names an older
    version of the campaign file. Its directory stays; collect leaves it out."""
    path = _campaign(tmp_path)
    first = hs.render(path)
    path.write_text(path.read_text().replace("nodes: [1, 2, 4, 8]", "nodes: [1, 2]"))
    second = hs.render(path)
    cdir = first.directory
    assert not (cdir / "ledger.sqlite").exists()  # rendering alone submits nothing
    assert all((r.run_dir / "run.json").exists() for r in first.runs)  # directories stay
    [res] = hs.collect(NAME)
    assert sorted(res.unfinished) == sorted(r.run.run_id for r in second.runs)
    assert len(res.stale) == 2 and not set(res.stale) & set(res.unfinished)
    [res] = hs.collect(NAME, include_stale=True)
    assert len(res.unfinished) == 4


def test_resubmit_leaves_stale_runs_alone(tmp_path: Path, workdir: Path) -> None:
    """A failed run the campaign no longer has is not run again by `resubmit`."""

    class Said(QuietReporter):
        def __init__(self) -> None:
            self.said: list[str] = []

        def info(self, message: str) -> None:
            self.said.append(message)

    path = _campaign(tmp_path, "[1, 2]")
    first = hs.render(path)
    with Ledger(first.directory) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in first.runs)
        for r in first.runs:
            ledger.update(r.run.run_id, RunState.FAILED, backend="local", exit_code="1")
    path.write_text(path.read_text().replace("nodes: [1, 2]", "nodes: [4]"))
    hs.render(path)
    said = Said()
    assert hs.resubmit(NAME, reporter=said) == []
    assert said.said == ["2 stale run(s), no longer in the campaign's matrix, left as is"]
    with Ledger(first.directory) as ledger:
        assert {r.state for r in ledger.rows()} == {RunState.FAILED}


def test_the_cli_shows_stale_runs_only_when_asked(tmp_path: Path, workdir: Path) -> None:
    path = _campaign(tmp_path)
    first = hs.render(path)
    _submitted(first.runs, first.directory)
    path.write_text(path.read_text().replace("nodes: [1, 2, 4, 8]", "nodes: [1, 2]"))
    hpcscale("render", str(path), check=True)

    def status(*extra: str) -> list[dict[str, object]]:
        return json.loads(hpcscale("status", NAME, "--json", *extra, check=True).stdout)[NAME]

    assert len(status()) == 2
    rows = status("--include-stale")
    assert len(rows) == 4 and sum(bool(r["stale"]) for r in rows) == 2

    def collected(*extra: str) -> list[dict[str, object]]:
        proc = hpcscale("collect", NAME, "--json", *extra, check=True)
        return json.loads(proc.stdout)["campaigns"][0]["rows"]

    assert len(collected()) == 2
    assert len(collected("--include-stale")) == 4
    out = tmp_path / "rep"
    hpcscale("report", NAME, "-o", str(out), "--include-stale", check=True)
    assert "included (--include-stale)" in (out / "index.md").read_text()
    hpcscale("report", NAME, "-o", str(out), check=True)
    assert "left out (--include-stale includes them)" in (out / "index.md").read_text()


# ------------------------------------------------------------------ a copied workdir


def _copy(src: Path, dst: Path) -> None:
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


def test_a_copied_workdir_points_into_the_copy(tmp_path: Path, workdir: Path) -> None:
    """The ledger stored absolute run directories: status, collect and --where in a copy of
    the workdir read the original's run directories."""
    path = _campaign(tmp_path, "[1, 2]")
    first = hs.render(path)
    _submitted(first.runs, first.directory)
    copy = tmp_path / "copy"
    _copy(workdir, copy)
    shutil.rmtree(workdir)  # moved, in effect: nothing may be read from the old place

    [st] = hs.status(NAME, copy)
    assert len(st.rows) == 2
    for row in st.rows:
        assert Path(row.run_dir) == copy / NAME / "runs" / row.run_id
        assert (Path(row.run_dir) / "run.json").exists()
    assert len(hs.select(st.rows, "nodes == 2")) == 1  # reads run.json through run_dir
    [res] = hs.collect(NAME, copy)
    assert len(res.rows) == 2
    assert all(Path(row["run_dir"]).is_relative_to(copy) for row in res.rows)
    proc = hpcscale("status", NAME, "--json", "--workdir", str(copy), check=True)
    for row in json.loads(proc.stdout)[NAME]:
        assert Path(str(row["run_dir"])).is_relative_to(copy)


def test_an_old_ledger_with_absolute_paths_works_in_a_copy(tmp_path: Path, workdir: Path) -> None:
    """A ledger written before paths were relative (absolute run_dir, no stale column), copied
    with its workdir: opening it migrates it, and its rows point into the copy."""
    path = _campaign(tmp_path, "[1, 2]")
    first = hs.render(path)
    cdir = first.directory
    db = sqlite3.connect(cdir / "ledger.sqlite")
    db.executescript(
        """CREATE TABLE runs (run_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL, backend TEXT,
        state TEXT NOT NULL DEFAULT 'RENDERED', job_id TEXT, array_job_id TEXT,
        array_index INTEGER, nodelist TEXT, exit_code TEXT, submitted_at REAL, started_at REAL,
        ended_at REAL, attempts INTEGER NOT NULL DEFAULT 0, message TEXT, runner_pid INTEGER,
        updated_at REAL NOT NULL);
        CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id), at REAL NOT NULL, state TEXT NOT NULL,
        detail TEXT);"""
    )
    db.executemany(
        "INSERT INTO runs(run_id, run_dir, backend, state, updated_at) "
        "VALUES (?, ?, 'local', 'COMPLETED', 0)",
        [(r.run.run_id, str(r.run_dir)) for r in first.runs],
    )
    db.commit()
    db.close()
    for r in first.runs:
        _finish(r.run, r.run_dir)
    copy = tmp_path / "copy"
    _copy(workdir, copy)
    shutil.rmtree(workdir)
    [st] = hs.status(NAME, copy)
    assert sorted(Path(r.run_dir) for r in st.rows) == sorted(
        copy / NAME / "runs" / r.run.run_id for r in first.runs
    )
    with Ledger(copy / NAME) as ledger:
        stored = [d for (d,) in ledger.db.execute("SELECT run_dir FROM runs")]
    assert stored == [f"runs/{r.run.run_id}" for r in first.runs]


def test_a_kept_version_is_never_overwritten(tmp_path: Path) -> None:
    kept = tmp_path / "versions" / "abc.yaml"
    keep_version(tmp_path, "abc", "name: first\n")
    keep_version(tmp_path, "abc", "name: second\n")  # the same id can only be the same text
    assert kept.read_text() == "name: first\n"
    assert [p.name for p in kept.parent.iterdir()] == ["abc.yaml"]  # no temp file left


@pytest.mark.parametrize("workers", [1, 2])
def test_forked_renders_name_the_version_too(tmp_path: Path, workdir: Path, workers: int) -> None:
    """Big campaigns render in forked workers: their run.json files name the version too."""
    path = _campaign(tmp_path)
    rendered = hs.render(path, workers=workers).runs
    version = campaign_version_of(path.read_text())
    assert {load_run_record(r.run_dir / "run.json").campaign_version for r in rendered} == {version}
