"""Local mode: run each rendered script on this machine, one at a time, through submitit's
LocalExecutor (timings would be skewed by concurrent runs)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import submitit

from hpcscale.core.render import Rendered
from hpcscale.state.ledger import Ledger, pid_alive

LOG_NAME = "local.out"
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
    state: str
    exit_code: int | None
    seconds: float
    tail: str


Progress = Callable[[str, int, int], None]


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        data = path.read_bytes()[-8192:]
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def current_epoch(path: Path) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 65536))
            found = EPOCH_LINE.findall(f.read())
    except FileNotFoundError:
        return None
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def run_one(
    r: Rendered, ledger: Ledger, on_progress: Progress | None = None, poll_s: float = 0.5
) -> Outcome:
    """Run one rendered script to the end; the ledger follows every state change."""
    log = r.run_dir / LOG_NAME
    log.unlink(missing_ok=True)
    executor = submitit.LocalExecutor(folder=r.run_dir / "submitit")
    executor.update_parameters(timeout_min=r.run.time_limit_min)
    row = ledger.get(r.run.run_id)
    ledger.update(
        r.run.run_id,
        "SUBMITTED",
        backend="local",
        submitted_at=time.time(),
        attempts=(row.attempts if row else 0) + 1,
        runner_pid=os.getpid(),
        exit_code=None,
        message=None,
        ended_at=None,
    )
    t0 = time.monotonic()
    job = executor.submit(run_script, str(r.run_dir / "job.sbatch"), str(log))
    ledger.update(
        r.run.run_id,
        "RUNNING",
        job_id=str(job.job_id),
        started_at=time.time(),
        nodelist=os.uname().nodename,
    )
    try:
        while not job.done():
            if on_progress and (ep := current_epoch(log)):
                on_progress(r.run.run_id, *ep)
            time.sleep(poll_s)
        code = job.result()
        error = None
    except (KeyboardInterrupt, SystemExit):
        stop_run(r.run_dir, job)
        ledger.update(
            r.run.run_id,
            "CANCELLED",
            "interrupted by the user",
            ended_at=time.time(),
            runner_pid=None,
        )
        raise
    except Exception as exc:  # the worker itself failed (not the script)
        code, error = None, f"{type(exc).__name__}: {exc}"
    seconds = time.monotonic() - t0
    tail = log_tail(log)
    state = "COMPLETED" if code == 0 else "FAILED"
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


def stop_run(run_dir: Path, job: submitit.local.local.LocalJob | None = None) -> None:
    """Stop this run's process group (by the group id it recorded), then the submitit worker."""
    pgid_file = run_dir / PGID_NAME
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        pgid = int(pgid_file.read_text())
        os.killpg(pgid, signal.SIGTERM)
        for _ in range(50):
            time.sleep(0.1)
            os.killpg(pgid, 0)
        os.killpg(pgid, signal.SIGKILL)
    if job is not None:
        with contextlib.suppress(Exception):
            job.cancel(check=False)


def reconcile(ledger: Ledger) -> list[str]:
    """Runs marked active whose local runner is gone were lost (crash, kill -9): say so."""
    lost = [
        row.run_id
        for row in ledger.rows()
        if row.backend == "local"
        and row.state in ("SUBMITTED", "RUNNING")
        and not pid_alive(row.runner_pid)
    ]
    if lost:
        ledger.update_many(
            lost,
            "LOST",
            "the hpcscale process running it is gone",
            ended_at=time.time(),
            runner_pid=None,
        )
    return lost
