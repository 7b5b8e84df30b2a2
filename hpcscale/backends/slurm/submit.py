"""Submitting to SLURM: intent file, sbatch, ledger write, per batch (see repair.py for why
in that order); and scancel."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcscale.backends.base import Reporter, Submission, wants_submit
from hpcscale.backends.slurm import query
from hpcscale.backends.slurm.arrays import Batch, arrays_dir, plan, write_array_files
from hpcscale.backends.slurm.repair import repair
from hpcscale.core.render import Rendered
from hpcscale.errors import BackendError
from hpcscale.formats.atomic import atomic_write
from hpcscale.state.ledger import Ledger
from hpcscale.state.lock import campaign_lock
from hpcscale.state.states import RunState


def submitted_fields(batch: Batch, job_id: str, index: int) -> dict[str, Any]:
    """Ledger columns of a run just handed to SLURM (earlier attempts' details cleared)."""
    base: dict[str, Any] = {
        "backend": "slurm",
        "submitted_at": time.time(),
        "nodelist": None,
        "exit_code": None,
        "started_at": None,
        "ended_at": None,
        "message": None,
        "runner_pid": None,
    }
    if batch.array:
        return {
            **base,
            "job_id": f"{job_id}_{index}",
            "array_job_id": job_id,
            "array_index": index,
        }
    return {**base, "job_id": job_id, "array_job_id": None, "array_index": None}


def sbatch(cdir: Path, batch: Batch, max_parallel: int | None) -> query.Result:
    """Intent file, then sbatch; the caller records the job and then drops the intent."""
    adir = arrays_dir(cdir)
    adir.mkdir(parents=True, exist_ok=True)
    if batch.array:
        write_array_files(cdir, batch)
    atomic_write(adir / f"{batch.token}.pending", " ".join(batch.run_ids) + "\n", durable=True)
    cwd = str(batch.runs[0][1].run_dir) if not batch.array else str(cdir)
    return query.run(batch.argv(cdir, max_parallel), timeout=60, cwd=cwd)


def submit_runs(
    rendered: Sequence[Rendered],
    ledger: Ledger,
    cdir: Path,
    *,
    force: bool,
    array: bool,
    max_parallel: int | None,
    reporter: Reporter,
) -> Submission:
    """Submit what is not yet submitted or done: one sbatch --array per shape (or per run)."""
    out = Submission("slurm")
    if not rendered:
        return out
    campaign = rendered[0].run.campaign
    with campaign_lock(cdir, "submit"):
        for w in repair(ledger, cdir, campaign):
            reporter.warn(w)
        rows = {row.run_id: row for row in ledger.rows()}
        indices = {rid: i for i, rid in enumerate(rows)}
        todo = [r for r in rendered if wants_submit(rows.get(r.run.run_id), force)]
        out.skipped = [r.run.run_id for r in rendered if r not in todo]
        if out.skipped:
            reporter.info(
                f"{len(out.skipped)} run(s) already submitted; skipping them (--force reruns)"
            )
        bad = [r for r in rows.values() if r.state.failed]
        if bad and not force:
            reporter.info(
                f"{len(bad)} run(s) ended unsuccessfully; `hpcscale resubmit {campaign} "
                "--failed` runs them again"
            )
        stamp = f"{int(time.time() * 1000):x}"
        for batch in plan(todo, indices, array=array, stamp=stamp):
            res = sbatch(cdir, batch, max_parallel)
            if not res.ok:
                shape = " ".join(batch.shape)
                msg = f"sbatch rejected {len(batch.runs)} run(s) ({shape}): {res.error}"
                reporter.warn(msg)
                out.errors.append(msg)
                out.rejected += batch.run_ids
                ledger.apply([(rid, None, None, {"message": res.error}) for rid in batch.run_ids])
                (arrays_dir(cdir) / f"{batch.token}.pending").unlink(missing_ok=True)
                continue
            jid = res.stdout.strip().split(";")[0]
            what = f"sbatch array {jid}" if batch.array else f"sbatch job {jid}"
            ledger.apply(
                [
                    (r.run.run_id, RunState.SUBMITTED, what, submitted_fields(batch, jid, i))
                    for i, r in batch.runs
                ],
                bump_attempts=True,
            )
            (arrays_dir(cdir) / f"{batch.token}.pending").unlink(missing_ok=True)
            out.submitted += batch.run_ids
            out.jobs.append(jid)
            label = f"array {jid} ({len(batch.runs)} runs)" if batch.array else f"job {jid}"
            reporter.info(f"submitted {label}: {' '.join(batch.shape)}")
        reporter.info(
            f"{len(out.submitted)} run(s) submitted, {len(out.skipped)} skipped, "
            f"{len(out.errors)} rejected"
        )
    return out


def cancel(ledger: Ledger, run_ids: Sequence[str]) -> list[str]:
    """scancel the jobs of these runs (pending array tasks included); returns the job ids."""
    rows = {r.run_id: r for r in ledger.rows()}
    chosen = [rid for rid in run_ids if rid in rows and rows[rid].backend == "slurm"]
    jobs = [j for j in (rows[rid].job_id for rid in chosen) if j]
    if not jobs:
        return []
    res = query.run(["scancel", *jobs])
    if not res.ok:
        raise BackendError(f"scancel failed: {res.error}")
    ledger.apply([(rid, None, None, {"message": "cancel requested"}) for rid in chosen])
    return jobs
