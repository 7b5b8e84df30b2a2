"""Run ids survive every change of layout: each shipped campaign, on its own system and on local
and slurm-local, plans to the ids recorded before the #30 redesign (tests/data/shipped_run_ids.json,
written by tests/data/make_shipped_run_ids.py from main d58a74b). A user's ledger rows, results
and report caches are keyed by them; a changed id would orphan every finished run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.data.make_shipped_run_ids import shipped_run_ids

RECORDED = Path(__file__).resolve().parents[3] / "tests" / "data" / "shipped_run_ids.json"


def test_every_shipped_campaign_keeps_its_run_ids() -> None:
    recorded = json.loads(RECORDED.read_text())
    assert sum(len(ids) for ids in recorded.values()) > 250  # the record is read
    now = shipped_run_ids()
    # every campaign recorded is still shipped (campaigns shipped since have no record)
    assert set(recorded) <= set(now), sorted(set(recorded) - set(now))
    changed = {k: (recorded[k], now[k]) for k in recorded if now[k] != recorded[k]}
    assert changed == {}
