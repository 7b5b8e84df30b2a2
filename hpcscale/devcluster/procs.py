"""Daemons we start and stop by recorded pid.

A record holds the pid, the program and the kernel's start time of the process, so a later
command can tell "our daemon" from an unrelated process that reused the pid. Nothing here ever
looks processes up by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from hpcscale.formats.atomic import atomic_write
from hpcscale.util.procstat import running, stat_fields


@dataclass(frozen=True)
class ProcRecord:
    """One daemon we started: enough to find it again and to prove it is still ours."""

    name: str
    pid: int
    argv: list[str]
    start_ticks: int
    log: str

    @classmethod
    def load(cls, path: Path) -> ProcRecord | None:
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None

    def save(self, path: Path) -> None:
        atomic_write(path, json.dumps(asdict(self), indent=1) + "\n", mode=0o644)


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields else None


# Daemons started by this very process become zombies when they exit until we collect them.
_children: dict[int, subprocess.Popen[bytes]] = {}


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]


def is_alive(pid: int) -> bool:
    """Running and not a zombie."""
    _reap(pid)
    return running(stat_fields(pid))


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_ours(rec: ProcRecord) -> bool:
    """The pid is alive, runs the recorded program and started when we started it."""
    if not is_alive(rec.pid):
        return False
    argv = cmdline(rec.pid)
    if not argv or Path(argv[0]).name != Path(rec.argv[0]).name:
        return False
    return start_ticks(rec.pid) == rec.start_ticks


def spawn(
    name: str,
    argv: Sequence[str],
    out_path: Path,
    env: Mapping[str, str],
    cwd: Path,
) -> ProcRecord:
    """Start a daemon in the foreground of its own session, detached from our terminal."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    _children[proc.pid] = proc
    return ProcRecord(name, proc.pid, list(argv), start_ticks(proc.pid) or -1, str(out_path))


def stop(records: Iterable[ProcRecord], timeout: float = 10.0) -> dict[str, str]:
    """SIGTERM each verified daemon, SIGKILL what is left after `timeout`.

    Returns name -> outcome ("stopped", "killed", "not running", "not ours (pid reused)").
    """
    records = list(records)
    outcome: dict[str, str] = {}
    waiting: list[ProcRecord] = []
    for rec in records:
        if not is_alive(rec.pid):
            outcome[rec.name] = "not running"
        elif not is_ours(rec):
            outcome[rec.name] = f"not ours (pid {rec.pid} reused), left alone"
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(rec.pid, signal.SIGTERM)
            waiting.append(rec)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        waiting = [r for r in waiting if is_alive(r.pid)]
        if waiting:
            time.sleep(0.05)
    for rec in waiting:
        outcome[rec.name] = "killed (did not stop on SIGTERM)"
        if is_ours(rec):
            with contextlib.suppress(ProcessLookupError):
                os.kill(rec.pid, signal.SIGKILL)
    for rec in waiting:
        end = time.monotonic() + 5
        while is_alive(rec.pid) and time.monotonic() < end:
            time.sleep(0.05)
    for rec in records:
        outcome.setdefault(rec.name, "stopped")
    return outcome
