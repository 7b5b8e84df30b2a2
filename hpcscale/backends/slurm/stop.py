"""`submit --max-failures N` on SLURM: once N runs of a campaign failed with the same reason
(hpcscale.backends.repeats), its array tasks that have not started are cancelled, so a campaign
that cannot work does not queue every run to the same traceback.

SLURM runs the jobs after `submit` has returned, so the count is taken where hpcscale sees runs
end: every refresh of the campaign (`status`, `collect`, `report`, `submit` itself). `submit`
leaves the limit and the time it submitted in the campaign directory; only failures of runs
submitted since count, so runs that failed before a fix never stop the resumed ones. Only tasks
SLURM still holds PENDING are cancelled (held first with `scontrol hold`, which spares one that
has started, then cancelled: never a running one, never another campaign's job); they are
recorded CANCELLED with the reason, and the next `submit` submits them again
(repeats.resumable).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from hpcscale.backends.base import Refreshed, StateChange
from hpcscale.backends.repeats import STOPPED, SameFailures
from hpcscale.backends.slurm import query
from hpcscale.backends.slurm.sync import output_files
from hpcscale.formats.atomic import atomic_write
from hpcscale.state.ledger import Ledger, RunRow
from hpcscale.state.reason import explain, read_outputs
from hpcscale.state.states import RunState

LIMIT_FILE = "max_failures.json"
WAITING = (RunState.SUBMITTED, RunState.PENDING)
_SRUN_EXIT = re.compile(r"srun: error: \S+: tasks? [0-9,-]+: Exited with exit code [0-9]+\s*\Z")


def remember(cdir: Path, limit: int, since: float) -> None:
    """What the next refreshes enforce: this submit's `--max-failures`, from `since` on."""
    atomic_write(cdir / LIMIT_FILE, json.dumps({"max_failures": limit, "since": since}) + "\n")


def _limit(cdir: Path) -> tuple[int, float]:
    try:
        data = json.loads((cdir / LIMIT_FILE).read_text())
        return int(data["max_failures"]), float(data["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0.0  # never submitted with a limit: nothing to stop


def _reason(row: RunRow, cdir: Path) -> str:
    """The failure's reason line, as `status` shows it, less srun's echo of the exit code
    (`srun: error: node1: task 0: Exited with exit code 1`): printed on its own stream, it may
    land after or amid the program's traceback, and would make one mistake two reasons."""
    text = read_outputs(output_files(row, cdir)) or ""
    own = "\n".join(ln for ln in text.splitlines() if not _SRUN_EXIT.match(ln))
    return explain(row.state, own, None, row.exit_code)


def same_reason(rows: list[RunRow], cdir: Path, limit: int, since: float) -> str | None:
    """The reason `limit` runs submitted since `since` failed with, in the order they ended."""
    same = SameFailures(limit)
    failed = [
        r
        for r in rows
        if r.backend == "slurm"
        and r.state.failed
        and r.state != RunState.CANCELLED  # the user's act (or ours), not the program's
        and (r.submitted_at or 0) >= since
    ]
    for row in sorted(failed, key=lambda r: r.ended_at or r.updated_at):
        if (stop := same.add(_reason(row, cdir))) is not None:
            return stop
    return None


def _pending(job_ids: set[str]) -> set[str] | None:
    """Which of these jobs SLURM holds PENDING now (None: squeue did not answer)."""
    jobs, res = query.squeue()
    if not res.ok:
        return None
    return {j.job_id for j in jobs if j.job_id in job_ids and j.state == RunState.PENDING}


def stop_after_same_failures(ledger: Ledger, cdir: Path) -> Refreshed:
    """Cancel the campaign's not yet started tasks once its limit of same failures is reached;
    the changes made and what to tell the user."""
    out = Refreshed()
    limit, since = _limit(cdir)
    if limit <= 0:
        return out
    rows = ledger.rows()
    waiting = {
        r.job_id: r for r in rows if r.backend == "slurm" and r.job_id and r.state in WAITING
    }
    if not waiting:
        return out
    stop = same_reason(rows, cdir, limit, since)
    if stop is None:
        return out
    pending = _pending(set(waiting))
    if not pending:
        return out
    # Held first: a task may start between squeue and scancel, and `scancel --state=PENDING`
    # on an array task id does not spare one that did (it was recorded CANCELLED while it ran
    # on). `scontrol hold` leaves a started task alone; what is still PENDING after it is held
    # and cannot start, so exactly those are cancelled.
    query.run(["scontrol", "hold", ",".join(sorted(pending))])  # started ones refuse: fine
    held = _pending(pending)
    if not held:
        if held is None:  # squeue unanswered: let them run as before
            query.run(["scontrol", "release", ",".join(sorted(pending))])
        return out
    res = query.run(["scancel", *sorted(held)])
    if not res.ok:
        query.run(["scontrol", "release", ",".join(sorted(held))])
        out.warnings.append(f"scancel of the not yet started runs failed: {res.error}")
        return out
    cancelled = sorted(held)
    said = f"{STOPPED} {limit} runs failed with: {stop}"
    ledger.apply(
        [
            (
                waiting[j].run_id,
                RunState.CANCELLED,
                said,
                {"message": said, "ended_at": time.time()},
            )
            for j in cancelled
        ]
    )
    out.changes += [StateChange(waiting[j].run_id, waiting[j].state, RunState.CANCELLED)
                    for j in cancelled]  # fmt: skip
    out.warnings.append(
        f"{said}; cancelled {len(cancelled)} run(s) of {cdir.name} that had not started "
        f"(running ones go on). Fix it, then `hpcscale submit` submits them again and "
        f"`hpcscale resubmit {cdir.name} --failed` reruns the failed (--max-failures 0 never "
        "stops)"
    )
    return out
