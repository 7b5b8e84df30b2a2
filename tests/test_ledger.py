"""The ledger under concurrent use by separate processes (as two shells running hpcscale)."""

from __future__ import annotations

import multiprocessing as mp
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
