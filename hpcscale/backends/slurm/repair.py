"""Crash repair. Every sbatch leaves an intent file (`arrays/<token>.pending`) written before
the call and removed after the ledger write; the job name carries campaign and run id (plain
jobs, from the template) or campaign and token (arrays, whose `<token>.runs` maps index -> run).
A later command that finds an intent file, or any submit, asks squeue and sacct for jobs by
those names and records what it finds before submitting anything: nothing is submitted twice.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hpcscale.backends.slurm import query
from hpcscale.backends.slurm.arrays import arrays_dir, read_runs
from hpcscale.backends.slurm.script import job_name
from hpcscale.state.ledger import Ledger
from hpcscale.state.states import RunState


def has_intents(cdir: Path) -> bool:
    adir = arrays_dir(cdir)
    return adir.is_dir() and any(adir.glob("*.pending"))


def repair(ledger: Ledger, cdir: Path, campaign: str) -> list[str]:
    """Record jobs SLURM has for this campaign that the ledger does not know (a crash between
    sbatch and the ledger write, a lost ledger). Returns warnings."""
    rows = {row.run_id: row for row in ledger.rows()}
    if not rows:
        return []
    adir = arrays_dir(cdir)
    lists = {p.stem: p for p in adir.glob("a-*.runs")} if adir.is_dir() else {}
    names = [job_name(campaign, rid) for rid in rows] + [job_name(campaign, t) for t in lists]
    first = ledger.db.execute("SELECT min(at) FROM events").fetchone()[0] or time.time()
    found, res = query.sacct_by_name(names, since=first - 86400)
    warnings = []
    if not res.ok:
        warnings.append(
            f"sacct failed ({res.error}); repaired from squeue only (finished jobs unseen)"
        )
    queued, qres = query.squeue(names)
    if not qres.ok:
        warnings.append(f"squeue failed ({qres.error})")
    jobs = {j.job_id: j for j in found}
    jobs.update({j.job_id: j for j in queued})  # squeue is fresher (sacct lags a few seconds)
    # run id -> (submit time, job id, fields, state) of the newest job found for it
    best: dict[str, tuple[float, str, dict[str, Any], RunState]] = {}
    prefix = job_name(campaign, "")
    for j in jobs.values():
        tail = j.name.removeprefix(prefix)
        main, _, idx = j.job_id.partition("_")
        if tail in rows and not idx:
            rid, fields = tail, {"job_id": main, "array_job_id": None, "array_index": None}
        elif tail in lists and idx:
            rid = read_runs(lists[tail]).get(int(idx), "")
            fields = {"job_id": j.job_id, "array_job_id": main, "array_index": int(idx)}
        else:
            continue
        if rid not in rows:
            continue
        submit = j.submit or 0.0
        if (
            rid not in best
            or submit > best[rid][0]
            or (submit == best[rid][0] and int(main) > int(best[rid][1].split("_")[0]))
        ):
            best[rid] = (submit, j.job_id, fields, j.state)
    changes = []
    for rid, (submit, jid, fields, state) in best.items():
        row = rows[rid]
        if row.job_id == jid:
            continue
        if row.job_id and row.submitted_at and submit <= row.submitted_at:
            continue  # an older job than the one recorded
        fields = {**fields, "backend": "slurm", "submitted_at": submit or time.time()}
        changes.append((rid, state, f"repaired: found job {jid} in SLURM", fields))
    if changes:
        ledger.apply(changes, bump_attempts=True)
        warnings.append(
            f"repaired the ledger: {len(changes)} run(s) had jobs in SLURM it did not record"
        )
    if res.ok and qres.ok and adir.is_dir():
        for p in adir.glob("*.pending"):
            p.unlink(missing_ok=True)
    return warnings
