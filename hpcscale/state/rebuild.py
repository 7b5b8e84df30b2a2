"""Rebuilding a campaign's ledger from its run directories, after a damaged ledger.sqlite was set
aside (hpcscale.state.ledger): the ledger is a cache of the truth, and this is the truth it
caches, read back.

Each `runs/<id>/run.json` is a run. Its state comes from its exit record (exit.json) when it has
one; which backend ran it from its output files (local.out, slurm-<job>.out, whose name gives
the job id). A SLURM run is recorded without an exit code, so the next `status` asks sacct for
its state (a time limit, an OOM kill) where SLURM is reachable; a SLURM run without an exit
record is SUBMITTED until sacct says more. A local run with output but no exit record died with
the process running it (LOST); a run with neither was never started (RENDERED). Runs whose
run.json names another version of the campaign file than campaign.yaml are marked stale.

Takes the ledger as a value (never imports it: the ledger imports this module when it opens).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcscale.formats.exit_record import read_exit_record
from hpcscale.formats.outputs import output_globs, scheduler_outputs
from hpcscale.formats.run_record import campaign_version_of
from hpcscale.state.states import RunState

DETAIL = "rebuilt from the run directory (the ledger was damaged)"


def _run_id(run_json: Path) -> tuple[str, str | None] | None:
    """(run id, campaign version) from a run.json; None when it is no run record."""
    try:
        data = json.loads(run_json.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return None
    version = data.get("campaign_version")
    return data["run_id"], version if isinstance(version, str) else None


def _queued_by(run_dir: Path) -> tuple[str | None, str | None]:
    """(scheduler, job id) of the newest job output in the run directory: a scheduler whose
    output name holds the job id (`slurm-<job>.out`) queued it and still knows it; None when
    the run never printed."""
    globs = output_globs()
    newest: tuple[float, str, Path] | None = None
    for name in globs:
        for path in scheduler_outputs(run_dir, name)[-1:]:
            t = path.stat().st_mtime
            if newest is None or t > newest[0]:
                newest = (t, name, path)
    if newest is None:
        return None, None
    _, name, path = newest
    prefix, star, suffix = globs[name].partition("*")
    if not star:
        return name, None
    return name, path.name[len(prefix) : len(path.name) - len(suffix)] or None


def _change(run_dir: Path) -> tuple[RunState, dict[str, Any]]:
    """The state and ledger fields one run directory says it has."""
    scheduler, job_id = _queued_by(run_dir)
    queued = job_id is not None  # its scheduler tracks the job: a refresh corrects the state
    fields: dict[str, Any] = {}
    if scheduler is not None:
        fields["backend"] = scheduler
    if queued:
        fields["job_id"] = job_id
    rec = read_exit_record(run_dir)
    if rec is None:
        if queued:
            return RunState.SUBMITTED, fields
        return (RunState.LOST if scheduler else RunState.RENDERED), fields
    fields["ended_at"] = rec.ended_unix_s if rec.ended_unix_s == rec.ended_unix_s else None
    if rec.started_unix_s == rec.started_unix_s:
        fields["started_at"] = rec.started_unix_s
    if not queued:  # a queued run's exit code comes from its scheduler (sacct), which corrects it
        fields["exit_code"] = str(rec.exit_code)
    if rec.succeeded:
        return RunState.COMPLETED, fields
    fields["message"] = rec.describe()
    return (RunState.CANCELLED if rec.signal else RunState.FAILED), fields


def rebuild(ledger: Any) -> int:
    """Fill an empty ledger (hpcscale.state.ledger.Ledger) from the run directories of its
    campaign; returns how many runs it recorded."""
    cdir: Path = ledger.dir
    try:
        current: str | None = campaign_version_of((cdir / "campaign.yaml").read_bytes())
    except OSError:
        current = None
    runs = cdir / "runs"
    found: list[tuple[str, Path, str | None]] = []
    if runs.is_dir():
        for d in sorted(p for p in runs.iterdir() if p.is_dir()):
            got = _run_id(d / "run.json")
            if got is not None:
                found.append((got[0], d, got[1]))
    ledger.ensure((rid, str(d)) for rid, d, _ in found)
    changes = []
    for rid, d, version in found:
        state, fields = _change(d)
        fields["stale"] = int(current is not None and version not in (None, current))
        changes.append((rid, state, DETAIL, fields))
    ledger.apply(changes)
    return len(found)
