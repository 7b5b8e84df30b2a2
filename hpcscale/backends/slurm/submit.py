"""The SLURM backend: job arrays per resource shape, crash repair, state refresh, cancel.

Nothing twice: every sbatch leaves an intent file (`arrays/<token>.pending`) written before
the call and removed after the ledger write; the job name carries campaign and run id (plain
jobs, from the template) or campaign and token (arrays, whose `<token>.runs` file maps array
index -> run). A later command that finds an intent file, or any submit, asks squeue and sacct
for jobs by those names and records what it finds before submitting anything.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcscale.backends.slurm import query
from hpcscale.backends.slurm.cluster import activate
from hpcscale.core.paths import atomic_write
from hpcscale.core.render import Rendered, job_name
from hpcscale.errors import BackendError
from hpcscale.state.ledger import ACTIVE, TERMINAL, Ledger, RunRow
from hpcscale.state.lock import campaign_lock

ARRAYS = "arrays"
# #SBATCH options that identify or place a job rather than size it (not part of a shape).
NOT_SHAPE = ("--job-name", "--comment", "--output", "--error")
# A submitted run is never submitted again by `submit` (failures go through `resubmit`).
SKIP_STATES = ACTIVE | TERMINAL
WRAPPER = """#!/bin/bash
# Written by hpcscale for the resource shape
#   {shape}
# Array task N runs the rendered job.sbatch of the run on line "N run_id run_dir" of the list
# file given as $1, with its output in that run's directory (slurm-<jobid>.out).
set -euo pipefail
line="$(awk -v i="${{SLURM_ARRAY_TASK_ID:?not a SLURM array task}}" \\
  '$1 == i {{print $2, $3; exit}}' "$1")"
if [ -z "$line" ]; then
  echo "hpcscale: no run for array index $SLURM_ARRAY_TASK_ID in $1" >&2
  exit 3
fi
run_dir="${{line#* }}"
cd "$run_dir"
exec bash ./job.sbatch > "$run_dir/slurm-$SLURM_JOB_ID.out" 2>&1
"""


# ---------------------------------------------------------------- shapes and command lines


def shape_of(r: Rendered) -> tuple[str, ...]:
    """The sizing #SBATCH options of a rendered script (nodes, tasks, cpus, gpus, time,
    partition, account, ...): runs with equal shapes can share one array."""
    opts = []
    for line in r.script.splitlines():
        if line.startswith("#SBATCH "):
            opt = line.removeprefix("#SBATCH ").strip()
            if not opt.startswith(NOT_SHAPE):
                opts.append(opt)
    return tuple(opts)


def shape_hash(shape: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(shape).encode()).hexdigest()[:10]


def index_spec(indices: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8' (sbatch --array syntax)."""
    parts: list[str] = []
    ordered = sorted(set(indices))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass
class Batch:
    """One sbatch call: an array of runs of one shape, or one plain job."""

    campaign: str
    token: str  # arrays: names the job and its .runs list; plain jobs: the run id
    runs: list[tuple[int, Rendered]]  # (array index, run)
    shape: tuple[str, ...]
    array: bool

    @property
    def run_ids(self) -> list[str]:
        return [r.run.run_id for _, r in self.runs]

    def argv(self, cdir: Path, max_parallel: int | None) -> list[str]:
        if not self.array:
            return ["sbatch", "--parsable", str(self.runs[0][1].run_dir / "job.sbatch")]
        spec = index_spec(i for i, _ in self.runs)
        if max_parallel:
            spec += f"%{max_parallel}"
        adir = cdir / ARRAYS
        return [
            "sbatch",
            "--parsable",
            f"--array={spec}",
            f"--job-name={job_name(self.campaign, self.token)}",
            f"--comment=hpcscale:{self.campaign}:{self.token}",
            *self.shape,
            f"--output={adir}/slurm-%A_%a.out",
            str(adir / f"{shape_hash(self.shape)}.sh"),
            str(adir / f"{self.token}.runs"),
        ]


def plan(
    rendered: list[Rendered], indices: dict[str, int], *, array: bool, stamp: str
) -> list[Batch]:
    """Group runs into sbatch calls: one array per shape, or one job per run."""
    if not array:
        return [
            Batch(r.run.campaign, r.run.run_id, [(indices[r.run.run_id], r)], shape_of(r), False)
            for r in rendered
        ]
    groups: dict[tuple[str, ...], list[tuple[int, Rendered]]] = {}
    for r in rendered:
        groups.setdefault(shape_of(r), []).append((indices[r.run.run_id], r))
    return [
        Batch(runs[0][1].run.campaign, f"a-{shape_hash(shape)}-{stamp}", runs, shape, True)
        for shape, runs in groups.items()
    ]


def describe(rendered: list[Rendered], *, array: bool, max_parallel: int | None) -> list[str]:
    """The sbatch command lines a submit would run (for `submit --dry-run`)."""
    if not rendered:
        return []
    cdir = rendered[0].run_dir.parent.parent
    indices = {r.run.run_id: i for i, r in enumerate(rendered)}
    batches = plan(rendered, indices, array=array, stamp="<stamp>")
    out = []
    for b in batches:
        if b.array:
            out.append(f"# {len(b.runs)} run(s): {' '.join(b.run_ids)}")
        out.append(" ".join(b.argv(cdir, max_parallel)))
    return out


# ---------------------------------------------------------------- ledger writes


def _submitted_fields(batch: Batch, job_id: str, index: int) -> dict[str, Any]:
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


# ---------------------------------------------------------------- repair


def _arrays(cdir: Path) -> Path:
    return cdir / ARRAYS


def _read_runs(path: Path) -> dict[int, str]:
    """index -> run id from an array's .runs file."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            out[int(parts[0])] = parts[1]
    return out


def repair(ledger: Ledger, cdir: Path, campaign: str) -> list[str]:
    """Record jobs SLURM has for this campaign that the ledger does not know (a crash between
    sbatch and the ledger write, a lost ledger). Returns warnings."""
    rows = {row.run_id: row for row in ledger.rows()}
    if not rows:
        return []
    adir = _arrays(cdir)
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
    best: dict[str, tuple[float, str, dict[str, Any], str]] = {}
    prefix = job_name(campaign, "")
    for j in jobs.values():
        tail = j.name.removeprefix(prefix)
        main, _, idx = j.job_id.partition("_")
        if tail in rows and not idx:
            rid, fields = tail, {"job_id": main, "array_job_id": None, "array_index": None}
        elif tail in lists and idx:
            rid = _read_runs(lists[tail]).get(int(idx), "")
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


# ---------------------------------------------------------------- submit


def _write_array_files(cdir: Path, batch: Batch) -> None:
    adir = _arrays(cdir)
    wrapper = adir / f"{shape_hash(batch.shape)}.sh"
    text = WRAPPER.format(shape=" ".join(batch.shape))
    if not wrapper.exists() or wrapper.read_text() != text:
        atomic_write(wrapper, text, mode=0o755)
    lines = "".join(f"{i} {r.run.run_id} {r.run_dir}\n" for i, r in batch.runs)
    atomic_write(adir / f"{batch.token}.runs", lines, durable=True)


def _sbatch(cdir: Path, batch: Batch, max_parallel: int | None) -> query.Result:
    """Intent file, then sbatch; the caller records the job and then drops the intent."""
    adir = _arrays(cdir)
    adir.mkdir(parents=True, exist_ok=True)
    if batch.array:
        _write_array_files(cdir, batch)
    atomic_write(adir / f"{batch.token}.pending", " ".join(batch.run_ids) + "\n", durable=True)
    cwd = str(batch.runs[0][1].run_dir) if not batch.array else str(cdir)
    return query.run(batch.argv(cdir, max_parallel), timeout=60, cwd=cwd)


def _job_id(res: query.Result) -> str:
    return res.stdout.strip().split(";")[0]


def submit_runs(
    rendered: list[Rendered],
    ledger: Ledger,
    cdir: Path,
    *,
    force: bool,
    array: bool,
    max_parallel: int | None,
    console: Any,
) -> None:
    """Submit what is not yet submitted or done: one sbatch --array per shape (or per run)."""
    if not rendered:
        return
    activate()
    campaign = rendered[0].run.campaign
    with campaign_lock(cdir, "submit"):
        for w in repair(ledger, cdir, campaign):
            console.print(f"[yellow]warning:[/yellow] {w}")
        rows = {row.run_id: row for row in ledger.rows()}
        indices = {rid: i for i, rid in enumerate(rows)}
        todo = [r for r in rendered if force or _wants_submit(rows.get(r.run.run_id))]
        skipped = len(rendered) - len(todo)
        if skipped:
            console.print(f"{skipped} run(s) already submitted; skipping them (--force reruns)")
        bad = [r for r in rows.values() if r.terminal and r.state != "COMPLETED"]
        if bad and not force:
            console.print(
                f"{len(bad)} run(s) ended unsuccessfully; `hpcscale resubmit {campaign} "
                "--failed` runs them again"
            )
        stamp = f"{int(time.time() * 1000):x}"
        errors = []
        submitted = 0
        for batch in plan(todo, indices, array=array, stamp=stamp):
            res = _sbatch(cdir, batch, max_parallel)
            if not res.ok:
                shape = " ".join(batch.shape)
                msg = f"sbatch rejected {len(batch.runs)} run(s) ({shape}): {res.error}"
                console.print(f"[red]{msg}[/red]", highlight=False)
                errors.append(msg)
                ledger.apply([(rid, None, None, {"message": res.error}) for rid in batch.run_ids])
                (_arrays(cdir) / f"{batch.token}.pending").unlink(missing_ok=True)
                continue
            jid = _job_id(res)
            what = f"sbatch array {jid}" if batch.array else f"sbatch job {jid}"
            ledger.apply(
                [
                    (r.run.run_id, "SUBMITTED", what, _submitted_fields(batch, jid, i))
                    for i, r in batch.runs
                ],
                bump_attempts=True,
            )
            (_arrays(cdir) / f"{batch.token}.pending").unlink(missing_ok=True)
            submitted += len(batch.runs)
            label = f"array {jid} ({len(batch.runs)} runs)" if batch.array else f"job {jid}"
            console.print(f"submitted {label}: {' '.join(batch.shape)}", highlight=False)
        console.print(f"{submitted} run(s) submitted, {skipped} skipped, {len(errors)} rejected")
    if errors:
        raise BackendError("\n".join(errors))


def _wants_submit(row: RunRow | None) -> bool:
    return row is None or row.state not in SKIP_STATES


# ---------------------------------------------------------------- refresh


def _tail(run_dir: str) -> str | None:
    """The last lines a failed run printed (newest slurm-*.out in its directory)."""
    outs = sorted(Path(run_dir).glob("slurm-*.out"), key=lambda p: p.stat().st_mtime)
    if not outs:
        return None
    try:
        with open(outs[-1], "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
            lines = [ln for ln in fh.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return None
    return "\n".join(lines[-8:])[-1500:] if lines else None


def refresh(ledger: Ledger, cdir: Path) -> list[str]:
    """Bring SLURM runs' states up to date: one sacct for all, squeue when sacct fails."""
    warnings: list[str] = []
    adir = _arrays(cdir)
    if adir.is_dir() and any(adir.glob("*.pending")):
        activate()
        warnings += repair(ledger, cdir, cdir.name)
    # ended runs without an exit code ended while sacct lagged (seen in squeue): ask again
    rows = [
        r
        for r in ledger.rows()
        if r.backend == "slurm" and r.job_id and (not r.terminal or r.exit_code is None)
    ]
    if not rows:
        return warnings
    activate()
    ids = [r.job_id for r in rows if r.job_id]
    info, failure = query.BatchWatcher().jobs(ids)
    missing = [jid for jid in ids if jid not in info]
    if failure is not None:
        warnings.append(
            f"sacct failed ({failure.error}): is slurmdbd down? States below come from squeue; "
            "runs that already left the queue keep their last known state"
        )
    if missing:
        queued, qres = query.squeue()
        if not qres.ok:
            warnings.append(f"squeue failed too ({qres.error}); states may be stale")
        for j in queued:
            # an end seen only in squeue waits for sacct (exit code, times), unless sacct is down
            if j.job_id in missing and (failure is not None or j.state in query.NOT_ENDED):
                info[j.job_id] = j
    changes = []
    for row in rows:
        j = info.get(row.job_id or "")
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
        if row.terminal and state not in TERMINAL:
            state = row.state  # sacct trailing squeue: never move an ended run backwards
        if state in TERMINAL and state != "COMPLETED" and row.message is None:
            fields["message"] = _tail(row.run_dir) or f"{state} (exit {j.exit_code})"
        if state != row.state or fields:
            changes.append((row.run_id, state, None, fields))
    if changes:
        ledger.apply(changes)
    return warnings


# ---------------------------------------------------------------- cancel


def cancel(ledger: Ledger, run_ids: list[str]) -> list[str]:
    """scancel the jobs of these runs (pending array tasks included); returns the job ids."""
    activate()
    rows = {r.run_id: r for r in ledger.rows()}
    jobs = [
        rows[rid].job_id
        for rid in run_ids
        if rid in rows and rows[rid].backend == "slurm" and rows[rid].job_id
    ]
    jobs = [j for j in jobs if j]
    if not jobs:
        return []
    res = query.run(["scancel", *jobs])
    if not res.ok:
        raise BackendError(f"scancel failed: {res.error}")
    ledger.apply([(rid, None, None, {"message": "cancel requested"}) for rid in run_ids])
    return jobs
