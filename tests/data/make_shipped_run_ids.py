"""Writes tests/data/shipped_run_ids.json: every shipped campaign's run ids, on its own system and
on local and slurm-local. Made once from the code before the #30 redesign (main d58a74b) and kept:
tests/test_run_ids.py holds every later layout to the same ids (ledger rows, results and report
caches are keyed by them). Run: python tests/data/make_shipped_run_ids.py"""

from __future__ import annotations

import json
from pathlib import Path

from hpcscale import api

ROOT = Path(__file__).resolve().parents[2]


def shipped_run_ids() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "campaigns").glob("*.yaml")):
        for system in (None, "local", "slurm-local"):
            try:
                runs = api.plan(path, system=system).runs
            except Exception as exc:  # a campaign a system cannot run: recorded as such
                out[f"{path.stem}@{system or 'own'}"] = [f"error: {type(exc).__name__}"]
                continue
            out[f"{path.stem}@{system or 'own'}"] = sorted(r.run_id for r in runs)
    return out


if __name__ == "__main__":
    target = Path(__file__).with_name("shipped_run_ids.json")
    target.write_text(json.dumps(shipped_run_ids(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")
