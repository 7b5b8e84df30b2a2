"""The ledger under concurrent use by separate processes (as two shells running hpcscale)."""

from __future__ import annotations

import multiprocessing as mp
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from hpcscale.state.ledger import Ledger


def _open_and_register(campaign_dir: str, k: int, out: mp.Queue, start: Any) -> None:
    start.wait()  # all at once
    try:
        with Ledger(campaign_dir) as ledger:
            ledger.ensure([(f"run{k}-{i}", f"/runs/{k}/{i}") for i in range(20)])
        out.put("ok")
    except Exception as exc:  # reported to the test, which shows it
        out.put(repr(exc))


def test_first_opens_racing_all_succeed(tmp_path: Path) -> None:
    """Six processes create the same new ledger at once, twenty times over. Switching a new
    database to WAL fails at once with "database is locked" in all but one of them unless
    opening is serialised (before it was, this test failed on every try)."""
    ctx = mp.get_context("fork")
    for round_ in range(20):
        cdir = tmp_path / f"c{round_}"
        out: mp.Queue = ctx.Queue()
        start = ctx.Barrier(6)
        procs = [
            ctx.Process(target=_open_and_register, args=(str(cdir), k, out, start))
            for k in range(6)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        assert results == ["ok"] * 6, (round_, results)
        with Ledger(cdir) as ledger:
            assert len(ledger.db.execute("SELECT run_id FROM runs").fetchall()) == 6 * 20


def test_run_dirs_are_stored_relative_to_the_campaign(tmp_path: Path) -> None:
    """So a copied or moved workdir's ledger points into the copy; rows give usable paths."""
    cdir = tmp_path / "c"
    with Ledger(cdir) as ledger:
        ledger.ensure([("a", str(cdir / "runs" / "a")), ("b", str(cdir / "runs" / "b"))])
        ledger.update("b", run_dir=str(cdir / "runs" / "b2"))
        ledger.ensure([("x", "/elsewhere/x")])  # outside the campaign: kept as given
        stored = dict(ledger.db.execute("SELECT run_id, run_dir FROM runs").fetchall())
    assert stored == {"a": "runs/a", "b": "runs/b2", "x": "/elsewhere/x"}
    moved = tmp_path / "moved"
    shutil.copytree(cdir, moved)
    with Ledger(moved) as ledger:
        dirs = {r.run_id: r.run_dir for r in ledger.rows()}
        assert ledger.get("a").run_dir == str(moved / "runs" / "a")  # type: ignore[union-attr]
    assert dirs == {
        "a": str(moved / "runs" / "a"),
        "b": str(moved / "runs" / "b2"),
        "x": "/elsewhere/x",
    }


def test_a_ledger_with_absolute_paths_is_migrated_on_open(tmp_path: Path) -> None:
    """Written before run directories were relative (and before `stale`): opened, it is
    brought up to date once, and rows resolve under wherever the campaign now is."""
    cdir = tmp_path / "c"
    cdir.mkdir()
    db = sqlite3.connect(cdir / "ledger.sqlite")
    db.executescript(
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL, backend TEXT, "
        "state TEXT NOT NULL DEFAULT 'RENDERED', job_id TEXT, array_job_id TEXT, "
        "array_index INTEGER, nodelist TEXT, exit_code TEXT, submitted_at REAL, "
        "started_at REAL, ended_at REAL, attempts INTEGER NOT NULL DEFAULT 0, message TEXT, "
        "runner_pid INTEGER, updated_at REAL NOT NULL);"
        "INSERT INTO runs(run_id, run_dir, updated_at) VALUES "
        "('a', '/old/place/c/runs/a', 0), ('odd', '/somewhere/else', 0);"
    )
    db.commit()
    db.close()
    with Ledger(cdir) as ledger:
        rows = {r.run_id: r for r in ledger.rows()}
        assert ledger.db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert rows["a"].run_dir == str(cdir / "runs" / "a") and not rows["a"].stale
    assert rows["odd"].run_dir == "/somewhere/else"


def test_mark_stale_marks_what_the_plan_lost_and_unmarks_what_came_back(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger.ensure([(rid, f"runs/{rid}") for rid in "abcd"])
        assert ledger.mark_stale(["a", "b"], " (v2)") == (["c", "d"], [])
        assert [r.run_id for r in ledger.rows(include_stale=False)] == ["a", "b"]
        assert [r.run_id for r in ledger.rows() if r.stale] == ["c", "d"]
        assert ledger.mark_stale(["a", "b"]) == ([], [])  # nothing changes twice
        assert ledger.mark_stale(["a", "c", "e"], " (v3)") == (["b"], ["c"])
        assert [r.run_id for r in ledger.rows() if r.stale] == ["b", "d"]
        details = [d for _, _, d in ledger.history("c")]
    assert details == [
        None,
        "stale: no longer in the campaign's matrix (v2)",
        "back in the campaign's matrix (v3)",
    ]
