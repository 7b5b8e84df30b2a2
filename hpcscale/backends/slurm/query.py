"""Talking to SLURM's client commands: every call has a timeout, every failure is a value.

State comes from one batched `sacct` through submitit's `SlurmInfoWatcher` (its command builder
and its parser of array ids such as `12_[3-5%2]`). We subclass it because the stock watcher
runs sacct without a timeout and swallows failures into a log line: we must say clearly when
slurmdbd is down and fall back to `squeue` instead of reporting stale states.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from submitit.slurm.slurm import SlurmInfoWatcher, read_job_id

from hpcscale.state.states import NOT_ENDED, RunState

TIMEOUT_S = 20.0
NAMES_MAX_CHARS = 100_000  # one --name argument (the kernel's limit is 128 KiB)
SACCT_FIELDS = "JobID,JobName,State,ExitCode,NodeList,Start,End,Submit"


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def error(self) -> str:
        """SLURM's own message (its `error:` lines), else the exit status."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        return "; ".join(lines) if lines else f"{self.argv[0]} exited with {self.returncode}"


TIMED_OUT = 124  # exit status of a client that did not answer in time (as timeout(1) says)
NOT_RUN = 127  # ... of a client that could not be started


def run(
    argv: list[str],
    timeout: float = TIMEOUT_S,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    new_session: bool = False,
) -> Result:
    """Run a SLURM client; a hang (dead slurmctld) or a missing program becomes a failed Result.
    `env`: variables to set for the child only (this process's environment stays as it is);
    `new_session`: out of the terminal's reach, so a Ctrl-C cannot kill it half-way."""
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env={**os.environ, **env} if env else os.environ,
            check=False,
            start_new_session=new_session,
        )
    except subprocess.TimeoutExpired:
        return Result(argv, TIMED_OUT, "", f"{argv[0]} did not answer within {timeout:.0f} s")
    except OSError as exc:
        return Result(argv, NOT_RUN, "", f"cannot run {argv[0]}: {exc}")
    return Result(argv, proc.returncode, proc.stdout, proc.stderr)


@dataclass(frozen=True)
class JobInfo:
    """One job (or array task) as SLURM reports it."""

    job_id: str  # "12" or "12_3"
    name: str
    state: RunState
    exit_code: str | None = None
    nodelist: str | None = None
    start: float | None = None
    end: float | None = None
    submit: float | None = None


def slurm_time(text: str | None) -> float | None:
    """SLURM's local ISO times ('2026-11-22T14:30:05'); 'Unknown'/'None' -> None."""
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _info(job_id: str, fields: dict[str, str]) -> JobInfo:
    return JobInfo(
        job_id=job_id,
        name=fields.get("JobName", ""),
        state=RunState.parse(fields.get("State")),
        exit_code=fields.get("ExitCode") or None,
        nodelist=(fields.get("NodeList") or None)
        if fields.get("NodeList") not in ("None assigned", "(null)")
        else None,
        start=slurm_time(fields.get("Start")),
        end=slurm_time(fields.get("End")),
        submit=slurm_time(fields.get("Submit")),
    )


class BatchWatcher(SlurmInfoWatcher):
    """submitit's watcher with our fields, `-X` (allocations only) and a timed, checked call."""

    def __init__(self, timeout: float = TIMEOUT_S) -> None:
        super().__init__(delay_s=600)
        self.timeout = timeout
        self.last: Result | None = None

    def _make_command(self) -> list[str] | None:
        ids = sorted({j.split("_")[0] for j in self._registered - self._finished})
        if not ids:
            return None
        return ["sacct", "-X", "--parsable2", "-o", SACCT_FIELDS, "-j", ",".join(ids)]

    def update(self) -> None:
        command = self._make_command()
        if command is None:
            return
        self._num_calls += 1
        for ids in name_lists(command[-1].split(",")):  # one sbatch per run: many ids
            self.last = run([*command[:-1], ids], self.timeout)
            if not self.last.ok:
                return
            self._info_dict.update(self.read_info(self.last.stdout))
        self._last_status_check = time.time()

    def jobs(self, job_ids: list[str]) -> tuple[dict[str, JobInfo], Result | None]:
        """job id -> info for those sacct knows (one call); the Result when sacct failed."""
        for jid in job_ids:
            self.register_job(jid)
        self.update()
        if self.last is not None and not self.last.ok:
            return {}, self.last
        out = {}
        for jid in job_ids:
            fields = self._info_dict.get(jid)
            if fields:
                out[jid] = _info(jid, fields)
        return out, None


def name_lists(names: list[str], max_chars: int = NAMES_MAX_CHARS) -> list[str]:
    """`--name` values of at most `max_chars` each (Linux refuses one argument over 128 KiB: a
    campaign of thousands of runs needs several calls)."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    for name in names:
        if current and size + len(name) + 1 > max_chars:
            out.append(",".join(current))
            current, size = [], 0
        current.append(name)
        size += len(name) + 1
    if current:
        out.append(",".join(current))
    return out


def sacct_by_name(names: list[str], since: float) -> tuple[list[JobInfo], Result]:
    """Jobs (array tasks expanded, pending ranges included) with any of these names."""
    start = datetime.fromtimestamp(since).strftime("%Y-%m-%dT%H:%M:%S")
    found: list[JobInfo] = []
    res = Result(["sacct"], 0, "", "")
    for chunk in name_lists(names):
        res = run(["sacct", "-X", "--parsable2", "-o", SACCT_FIELDS, "-S", start, "--name", chunk])
        if not res.ok:
            return [], res
        parsed = BatchWatcher().read_info(res.stdout)
        found += [_info(jid, fields) for jid, fields in parsed.items()]
    return found, res


def squeue(names: list[str] | None = None) -> tuple[list[JobInfo], Result]:
    """Our jobs slurmctld still holds (array tasks one per line), optionally only these names.

    `-t all` includes jobs that ended in the last few minutes (MinJobAge): they are not in
    sacct yet (it trails by seconds), and a job that ended in that gap must still be found.
    Not `-j`: squeue rejects the whole call when one id has left slurmctld's memory."""
    argv = ["squeue", "--me", "-h", "-r", "-t", "all", "-o", "%i|%j|%T|%N|%V|%S|%e"]
    stdout = ""
    res = Result(argv, 0, "", "")
    for chunk in name_lists(names) if names else [None]:
        res = run([*argv, "--name", chunk] if chunk else argv)
        if not res.ok:
            return [], res
        stdout += res.stdout
    jobs = []
    for line in stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 7:
            continue
        jid, name, state, nodes, submit, start, end = parts
        parsed = RunState.parse(state)
        ended = parsed not in NOT_ENDED
        for split in read_job_id(jid):
            jobs.append(
                JobInfo(
                    job_id="_".join(split[:2]),
                    name=name,
                    state=parsed,
                    nodelist=nodes or None,
                    start=slurm_time(start) if parsed != RunState.PENDING else None,
                    end=slurm_time(end) if ended else None,
                    submit=slurm_time(submit),
                )
            )
    return jobs, res
