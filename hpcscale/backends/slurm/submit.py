"""Submitting to SLURM: intent file, sbatch, ledger write, per batch (see repair.py for why
in that order); what the queue's limits leave no room for waits, RENDERED, for the next submit
or for `follow`; and scancel."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcscale.backends.base import Reporter, Submission, wants_submit
from hpcscale.backends.slurm import query
from hpcscale.backends.slurm.arrays import (
    Batch,
    arrays_dir,
    chained,
    plan,
    write_array_files,
)
from hpcscale.backends.slurm.limits import Limits, Room, read_limits, read_usage, room
from hpcscale.backends.slurm.repair import repair
from hpcscale.backends.slurm.sync import CANCEL_REQUESTED
from hpcscale.formats.atomic import atomic_write
from hpcscale.model.errors import BackendError
from hpcscale.render.render import Rendered
from hpcscale.state.ledger import Ledger
from hpcscale.state.lock import campaign_lock
from hpcscale.state.states import RunState

# sbatch refusing for a full queue (the runs wait) rather than for the job itself
LIMIT_ERRORS = ("MaxSubmitJob", "job submit limit", "temporarily unable to accept job")
POLL_S = (2.0, 60.0)  # --follow: first and longest pause between looks at the queue


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
    return query.run(batch.argv(cdir, max_parallel), timeout=60, cwd=cwd, new_session=True)


@contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """A Ctrl-C during sbatch + ledger write takes effect once the job is recorded, so an
    interrupted submit leaves a ledger that says exactly what SLURM has."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    if caught:
        raise KeyboardInterrupt


@dataclass
class Submitter:
    """One `submit`: the runs it means to submit, in rounds that each submit what fits."""

    rendered: Sequence[Rendered]
    ledger: Ledger
    cdir: Path
    force: bool
    array: bool
    max_parallel: int | None
    reporter: Reporter
    limits: Limits
    out: Submission = field(default_factory=lambda: Submission("slurm"))
    todo: list[Rendered] = field(default_factory=list)
    job_before: dict[str, str | None] = field(default_factory=dict)  # run id -> job id at start
    done: set[str] = field(default_factory=set)  # submitted or rejected by this submit
    room: Room = field(default_factory=lambda: Room(None, ""))

    @property
    def campaign(self) -> str:
        return self.rendered[0].run.campaign

    def start(self) -> None:
        """Choose the runs to submit (the first round's repair already done)."""
        rows = {row.run_id: row for row in self.ledger.rows()}
        self.todo = [r for r in self.rendered if wants_submit(rows.get(r.run.run_id), self.force)]
        self.job_before = {
            r.run.run_id: getattr(rows.get(r.run.run_id), "job_id", None) for r in self.todo
        }
        chosen = set(self.job_before)
        self.out.skipped = [r.run.run_id for r in self.rendered if r.run.run_id not in chosen]
        if self.out.skipped:
            self.reporter.info(
                f"{len(self.out.skipped)} run(s) already submitted; skipping them (--force reruns)"
            )
        bad = [r for r in rows.values() if r.state.failed]
        if bad and not self.force:
            self.reporter.info(
                f"{len(bad)} run(s) ended unsuccessfully; `hpcscale resubmit {self.campaign} "
                "--failed` runs them again"
            )

    def remaining(self) -> list[Rendered]:
        """Runs still to submit; one another submitter handled meanwhile is left to it."""
        rows = {row.run_id: row for row in self.ledger.rows()}
        return [
            r
            for r in self.todo
            if r.run.run_id not in self.done
            and getattr(rows.get(r.run.run_id), "job_id", None) == self.job_before[r.run.run_id]
        ]

    def round(self, first: bool) -> int:
        """Submit what fits now; returns how many runs wait for room in the queue."""
        with campaign_lock(self.cdir, "submit"):
            if first:
                self.repair()
                self.start()
            todo = self.remaining()
            if not todo:
                return 0
            self.room = self.measure_room()
            if self.room.runs == 0:
                return len(todo)
            if not first:  # a submitter that died since may have left jobs unrecorded
                self.repair()
                todo = self.remaining()
            if self.room.runs is not None:
                todo = todo[: self.room.runs]
            indices = {row.run_id: i for i, row in enumerate(self.ledger.rows())}
            stamp = f"{int(time.time() * 1000):x}"
            batches = plan(
                todo, indices, array=self.array, stamp=stamp, max_array_size=self.limits.array_tasks
            )
            for batch in batches:  # a throttle chains them to this submit's earlier jobs
                with ctrl_c_deferred():
                    if not self.submit_batch(chained(batch, self.max_parallel, self.out.jobs)):
                        break  # the queue is full after all: the rest waits
            return len(self.remaining())

    def repair(self) -> None:
        for w in repair(self.ledger, self.cdir, self.campaign):
            self.reporter.warn(w)

    def measure_room(self) -> Room:
        if self.limits.max_submit is None and self.limits.max_job_count is None:
            return Room(None, "no queue limit visible")
        usage, res = read_usage()
        if usage is None:
            self.reporter.warn(f"squeue failed ({res.error}); submitting without a room check")
        return room(self.limits, usage)

    def submit_batch(self, batch: Batch) -> bool:
        """One sbatch and its ledger write; False when SLURM said its queue is full."""
        cdir, ledger = self.cdir, self.ledger
        intent = arrays_dir(cdir) / f"{batch.token}.pending"
        res = sbatch(cdir, batch, self.max_parallel)
        if not res.ok and any(e in res.error for e in LIMIT_ERRORS):
            intent.unlink(missing_ok=True)
            self.room = Room(0, f"sbatch: {res.error}")
            return False
        if not res.ok:
            msg = f"sbatch rejected {len(batch.runs)} run(s) ({' '.join(batch.shape)}): {res.error}"
            self.reporter.warn(msg)
            self.out.errors.append(msg)
            self.out.rejected += batch.run_ids
            self.done.update(batch.run_ids)
            note = res.error
            if res.returncode == query.TIMED_OUT:  # it may have gone in: the intent stays
                note += "; the next hpcscale command looks for its job in SLURM"
            else:
                intent.unlink(missing_ok=True)
            ledger.apply([(rid, None, None, {"message": note}) for rid in batch.run_ids])
            return True
        jid = res.stdout.strip().split(";")[0]
        what = f"sbatch array {jid}" if batch.array else f"sbatch job {jid}"
        ledger.apply(
            [
                (r.run.run_id, RunState.SUBMITTED, what, submitted_fields(batch, jid, i))
                for i, r in batch.runs
            ],
            bump_attempts=True,
        )
        intent.unlink(missing_ok=True)
        self.done.update(batch.run_ids)
        self.out.submitted += batch.run_ids
        self.out.jobs.append(jid)
        label = f"array {jid} ({len(batch.runs)} runs)" if batch.array else f"job {jid}"
        label += f" after {batch.after}" if batch.after else ""
        self.reporter.info(f"submitted {label}: {' '.join(batch.shape)}")
        return True

    def summary(self, waiting: int) -> str:
        out = self.out
        text = (
            f"{len(out.submitted)} run(s) submitted, {len(out.skipped)} skipped, "
            f"{len(out.errors)} rejected"
        )
        return text + (f", {waiting} waiting" if waiting else "")


def submit_runs(
    rendered: Sequence[Rendered],
    ledger: Ledger,
    cdir: Path,
    *,
    force: bool,
    array: bool,
    max_parallel: int | None,
    reporter: Reporter,
    follow: bool = False,
    limits: Limits | None = None,
) -> Submission:
    """Submit what is not yet submitted or done: per resource shape, job arrays of at most the
    cluster's MaxArraySize tasks (or one sbatch per run), as many runs as the queue's visible
    limits have room for. The rest waits (RENDERED) for the next submit, or with `follow` is
    submitted as the queue drains."""
    if not rendered:
        return Submission("slurm")
    s = Submitter(
        rendered, ledger, cdir, force, array, max_parallel, reporter, limits or read_limits()
    )
    waiting = s.round(first=True)
    if waiting and not follow:
        reporter.info(
            f"{waiting} run(s) wait for room in the queue ({s.room.why}); they stay RENDERED: "
            "`hpcscale submit` again submits them, `--follow` keeps submitting as it drains"
        )
    elif waiting:
        follow_up(s, waiting)
        waiting = 0
    reporter.info(s.summary(waiting))
    return s.out


def follow_up(s: Submitter, waiting: int) -> None:
    """Keep submitting as the queue drains, saying how far it got; Ctrl-C stops between
    sbatch calls (the ledger then holds every job submitted, the rest stay RENDERED)."""
    total = len(s.todo)
    pause = POLL_S[0]
    try:
        while waiting:
            s.reporter.info(
                f"following: {total - waiting}/{total} run(s) submitted, {waiting} waiting "
                f"({s.room.why}); next look in {pause:.0f} s"
            )
            time.sleep(pause)
            before = waiting
            waiting = s.round(first=False)
            pause = POLL_S[0] if waiting < before else min(pause * 2, POLL_S[1])
    except KeyboardInterrupt:
        s.reporter.info(
            f"stopped following: {len(s.out.submitted)} run(s) submitted, {waiting} still "
            "RENDERED; `hpcscale submit` submits them"
        )
        raise


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
    ledger.apply([(rid, None, None, {"message": CANCEL_REQUESTED}) for rid in chosen])
    return jobs
