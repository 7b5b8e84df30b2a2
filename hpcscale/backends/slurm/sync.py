"""Bringing SLURM runs' states into the ledger: one sacct for all, squeue when sacct fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcscale.backends.base import Refreshed, StateChange
from hpcscale.backends.slurm import arrays, query
from hpcscale.backends.slurm.repair import has_intents, repair
from hpcscale.formats.outputs import scheduler_outputs
from hpcscale.state.ledger import Ledger, RunRow
from hpcscale.state.states import NOT_ENDED, RunState
from hpcscale.util.logtail import tail

CANCEL_REQUESTED = "cancel requested"  # the message `cancel` leaves on a run


def failure_tail(run_dir: str) -> str | None:
    """The last lines a failed run printed (newest slurm-*.out in its directory)."""
    outs = scheduler_outputs(run_dir, "slurm")
    text = tail(outs[-1], lines=8, max_bytes=4096) if outs else None
    return text[-1500:] if text else None


def output_files(row: RunRow, cdir: Path) -> list[Path]:
    """A SLURM run's output files that exist: the job script's own (the newest slurm-*.out in
    its run directory: a resubmitted run has one per attempt), then, for an array task, the
    array's file for it (arrays/slurm-A_a.out), where slurmstepd writes what it says of the
    task (a time limit, an OOM kill) and the wrapper its own refusals."""
    out = scheduler_outputs(row.run_dir, "slurm")[-1:]
    if row.array_job_id is not None and row.array_index is not None:
        task = arrays.arrays_dir(cdir) / f"slurm-{row.array_job_id}_{row.array_index}.out"
        if task.is_file():
            out.append(task)
    return out


def refresh(ledger: Ledger, cdir: Path) -> Refreshed:
    """Bring SLURM runs' states up to date; changes made and warnings to show."""
    out = Refreshed()
    if has_intents(cdir):
        out.warnings += repair(ledger, cdir, cdir.name)
    # ended runs without an exit code ended while sacct lagged (seen in squeue): ask again
    rows = [
        r
        for r in ledger.rows()
        if r.backend == "slurm" and r.job_id and (not r.terminal or r.exit_code is None)
    ]
    if not rows:
        return out
    ids = [r.job_id for r in rows if r.job_id]
    info, failure = query.BatchWatcher().jobs(ids)
    missing = [jid for jid in ids if jid not in info]
    if failure is not None:
        out.warnings.append(
            f"sacct failed ({failure.error}): is slurmdbd down? States below come from squeue; "
            "runs that already left the queue keep their last known state"
        )
    vanished: set[str] = set()
    if missing:
        queued, qres = query.squeue()
        if not qres.ok:
            out.warnings.append(f"squeue failed too ({qres.error}); states may be stale")
        elif failure is None:
            vanished = set(missing) - {j.job_id for j in queued}
        for j in queued:
            # an end seen only in squeue waits for sacct (exit code, times), unless sacct is down
            if j.job_id in missing and (failure is not None or j.state in NOT_ENDED):
                info[j.job_id] = j
    changes = []
    for row in rows:
        j = info.get(row.job_id or "")
        if j is None and row.job_id in vanished and row.message == CANCEL_REQUESTED:
            # a task of a not yet started array, cancelled: SLURM keeps no record of it
            j = query.JobInfo(row.job_id or "", "", RunState.CANCELLED)
        if j is None:
            continue
        fields: dict[str, Any] = {}
        for col, value in (
            ("nodelist", j.nodelist),
            ("exit_code", j.exit_code),
            ("started_at", j.start),
            ("ended_at", j.end),
        ):
            if value is not None and value != getattr(row, col):
                fields[col] = value
        state = j.state
        if row.terminal and not state.terminal:
            state = row.state  # sacct trailing squeue: never move an ended run backwards
        if state.failed and row.message is None:
            fields["message"] = failure_tail(row.run_dir) or f"{state} (exit {j.exit_code})"
        if state != row.state or fields:
            changes.append((row.run_id, state, None, fields))
            if state != row.state:
                out.changes.append(StateChange(row.run_id, row.state, state))
    if changes:
        ledger.apply(changes)
    return out
