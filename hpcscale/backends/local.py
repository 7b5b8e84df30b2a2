"""Local mode: run each rendered script on this machine, one at a time, through submitit's
LocalExecutor (timings would be skewed by concurrent runs)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import submitit

from hpcscale.backends.base import (
    Backend,
    BackendOptions,
    Refreshed,
    StateChange,
    Submission,
)
from hpcscale.backends.repeats import SameFailures
from hpcscale.model.registry import SCHEDULERS
from hpcscale.render.render import Rendered
from hpcscale.state.ledger import Ledger, RunRow, pid_alive
from hpcscale.state.lock import campaign_lock
from hpcscale.state.reason import explain
from hpcscale.state.states import RunState
from hpcscale.util.logtail import tail as log_tail
from hpcscale.util.procstat import PROC, session_members
from hpcscale.util.shell import quote

LOG_NAME = SCHEDULERS["local"].output  # the whole job's output, all ranks
PGID_NAME = ".pgid"
EPOCH_LINE = re.compile(rb"\[hpcscale\] epoch (\d+)/(\d+)")


def run_script(script: str, log: str) -> int:
    """Runs inside submitit's worker: the script in its own process group, output to `log`.

    The group id is written next to the log so the submitter can stop exactly this run's
    processes (mpirun and its ranks) on Ctrl-C.
    """
    run_dir = Path(script).parent
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            ["bash", script],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=run_dir,
            start_new_session=True,
        )
        (run_dir / PGID_NAME).write_text(str(proc.pid))

        def _forward(signum: int, _frame: object) -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)

        signal.signal(signal.SIGINT, _forward)
        signal.signal(signal.SIGTERM, _forward)
        code = proc.wait()
    with contextlib.suppress(FileNotFoundError):
        (run_dir / PGID_NAME).unlink()
    return code


@dataclass
class Outcome:
    run_id: str
    state: RunState
    exit_code: int | None
    seconds: float
    tail: str | None


Progress = Callable[[str, int, int], None]


def current_epoch(path: Path) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 65536))
            found = EPOCH_LINE.findall(f.read())
    except FileNotFoundError:
        return None
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def run_one(
    r: Rendered, ledger: Ledger, on_progress: Progress | None = None, poll_s: float = 0.1
) -> Outcome:
    """Run one rendered script to the end; the ledger follows every state change."""
    log = r.run_dir / LOG_NAME
    log.unlink(missing_ok=True)
    executor = submitit.LocalExecutor(folder=r.run_dir / "submitit")
    executor.update_parameters(timeout_min=r.run.time_limit_min)
    row = ledger.get(r.run.run_id)
    ledger.update(
        r.run.run_id,
        RunState.SUBMITTED,
        backend="local",
        submitted_at=time.time(),
        attempts=(row.attempts if row else 0) + 1,
        runner_pid=os.getpid(),
        exit_code=None,
        message=None,
        ended_at=None,
    )
    t0 = time.monotonic()
    with _sigint_ignored():  # inherited by submitit's controller: Ctrl-C is ours to handle
        job = executor.submit(run_script, str(r.run_dir / "job.sbatch"), str(log))
    ledger.update(
        r.run.run_id,
        RunState.RUNNING,
        job_id=str(job.job_id),
        started_at=time.time(),
        nodelist=os.uname().nodename,
    )
    try:
        while not job.done():
            if on_progress and (ep := current_epoch(log)):
                on_progress(r.run.run_id, *ep)
            if _cancelled(ledger, r.run.run_id):  # `hpcscale cancel` from another shell
                stop_run(r.run_dir, job)
            time.sleep(poll_s)
        code = job.result()
        error = None
    except (KeyboardInterrupt, SystemExit):
        stop_run(r.run_dir, job)
        ledger.update(
            r.run.run_id,
            RunState.CANCELLED,
            "interrupted by the user",
            ended_at=time.time(),
            runner_pid=None,
        )
        raise
    except Exception as exc:  # the worker itself failed (not the script)
        code, error = None, f"{type(exc).__name__}: {exc}"
    seconds = time.monotonic() - t0
    tail = log_tail(log)
    state = RunState.COMPLETED if code == 0 else RunState.FAILED
    if code != 0 and _cancelled(ledger, r.run.run_id):
        state = RunState.CANCELLED
    message = None if code == 0 else (error or f"exit code {code}") + ("\n" + tail if tail else "")
    ledger.update(
        r.run.run_id,
        state,
        None if code == 0 else (error or f"exit code {code}"),
        exit_code=None if code is None else str(code),
        ended_at=time.time(),
        message=message,
        runner_pid=None,
    )
    return Outcome(r.run.run_id, state, code, seconds, tail)


def _cancelled(ledger: Ledger, run_id: str) -> bool:
    row = ledger.get(run_id)
    return row is not None and row.state == RunState.CANCELLED


def _recorded_pgid(run_dir: Path, job: submitit.local.local.LocalJob | None) -> int | None:
    """The run's process group, waited for while its worker is alive: a Ctrl-C just after the
    submit comes before the worker has started the script and recorded the group, and
    cancelling the worker then would leave the script running with nobody to stop it."""
    for _ in range(300):
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int((run_dir / PGID_NAME).read_text())
        if job is None or job.done():
            return None
        time.sleep(0.05)
    return None


def _signal_session(sid: int, signum: int) -> None:
    """Signal the run's session: its script's process group and any group a launcher made
    inside it (Open MPI's mpirun gives each rank its own: a run cancelled while mpirun was
    still starting its rank left the rank running, out of the group's reach)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signum)
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _session_left(sid: int) -> bool:
    """Something of the run still runs: its session's members, or without /proc (not Linux)
    its process group."""
    if PROC.is_dir():
        return bool(session_members(sid))
    try:
        os.killpg(sid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_run(run_dir: Path, job: submitit.local.local.LocalJob | None = None) -> None:
    """Stop this run's processes (its session, by the id it recorded: the script's process
    group and any group a launcher made inside it), then the submitit worker."""
    pgid = _recorded_pgid(run_dir, job)
    if pgid is not None:
        _signal_session(pgid, signal.SIGTERM)
        for _ in range(50):
            time.sleep(0.1)
            if not _session_left(pgid):
                break
        else:
            _signal_session(pgid, signal.SIGKILL)
    if job is not None:
        with contextlib.suppress(Exception):
            job.cancel(check=False)
        with contextlib.suppress(Exception):  # it ignores SIGINT (_sigint_ignored)
            job._process.terminate()  # submitit's controller: no public handle


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while submitit starts its controller, which inherits that: a terminal's
    Ctrl-C then reaches only hpcscale (and the worker's own handler), which stop the run and
    say so, instead of the controller dying with a KeyboardInterrupt traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def reconcile(ledger: Ledger) -> list[str]:
    """Runs marked active whose local runner is gone were lost (crash, kill -9): say so."""
    lost = [
        row.run_id
        for row in ledger.rows()
        if row.backend == "local"
        and row.state in (RunState.SUBMITTED, RunState.RUNNING)
        and not pid_alive(row.runner_pid)
    ]
    if lost:
        ledger.update_many(
            lost,
            RunState.LOST,
            "the hpcscale process running it is gone",
            ended_at=time.time(),
            runner_pid=None,
        )
    return lost


class LocalBackend(Backend):
    """Runs each rendered script on this machine, one at a time, in the foreground."""

    name = "local"

    def submit(
        self, rendered: Sequence[Rendered], ledger: Ledger, options: BackendOptions
    ) -> Submission:
        out = Submission(self.name)
        with campaign_lock(self.campaign_dir, "local run", wait=False):
            reconcile(ledger)
            rows = {row.run_id: row for row in ledger.rows()}
            # an interrupted or failed local run runs again on the next submit (resume)
            done = {rid for rid, row in rows.items() if row.state == RunState.COMPLETED}
            todo = [r for r in rendered if options.force or r.run.run_id not in done]
            out.skipped = [
                r.run.run_id for r in rendered if r.run.run_id in done and not options.force
            ]
            if out.skipped:
                self.reporter.info(
                    f"{len(out.skipped)} run(s) already completed; skipping them (--force reruns)"
                )
            same = SameFailures(options.max_failures)
            for i, r in enumerate(todo, 1):
                self.reporter.run_started(r, i, len(todo))
                outcome = run_one(r, ledger, self.reporter.run_progress)
                self.reporter.run_ended(r, outcome.state, outcome.seconds, outcome.tail)
                out.submitted.append(r.run.run_id)
                out.jobs.append(r.run.run_id)
                if outcome.state == RunState.COMPLETED:
                    continue
                out.failed.append(r.run.run_id)
                if outcome.state == RunState.CANCELLED:  # the user's act, not the program's
                    continue
                code = None if outcome.exit_code is None else str(outcome.exit_code)
                why = explain(outcome.state, outcome.tail, None, code)
                if (stop := same.add(why)) is not None and i < len(todo):
                    out.stopped, out.not_started = stop, [x.run.run_id for x in todo[i:]]
                    self.reporter.warn(
                        f"stopped: {options.max_failures} runs failed the same way ({stop}); "
                        f"{len(out.not_started)} run(s) not started. Fix it and run "
                        "`hpcscale submit` again to resume (--max-failures 0 never stops)"
                    )
                    break
        return out

    def refresh(self, ledger: Ledger) -> Refreshed:
        lost = reconcile(ledger)
        out = Refreshed()
        if lost:
            out.changes = [StateChange(rid, RunState.RUNNING, RunState.LOST) for rid in lost]
            out.warnings.append(f"{len(lost)} local run(s) lost: their hpcscale process is gone")
        return out

    def cancel(self, ledger: Ledger, run_ids: Sequence[str]) -> list[str]:
        """Mark the runs cancelled and stop their process groups (by the group id each
        recorded); the process running them also stops a run it sees cancelled (its group may
        not be recorded yet) and records the end."""
        rows = {r.run_id: r for r in ledger.rows()}
        stopped = []
        for rid in run_ids:
            row = rows.get(rid)
            if row is None or row.backend != self.name or row.terminal:
                continue
            ledger.update(rid, RunState.CANCELLED, "cancelled by the user", ended_at=time.time())
            stop_run(Path(row.run_dir))
            stopped.append(row.job_id or rid)
        return stopped

    def outputs(self, row: RunRow) -> list[Path]:
        log = Path(row.run_dir) / LOG_NAME
        return [log] if log.is_file() else []

    def describe(self, rendered: Sequence[Rendered], options: BackendOptions) -> list[str]:
        lines = []
        for r in rendered:
            where = r.run.cwd or str(r.run_dir)  # where the job script starts the program
            lines.append(f"# {r.run.run_id}: cd {quote(where)}")
            lines.append(str(r.launch))
        return lines
