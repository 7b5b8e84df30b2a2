"""What the kernel says of a process (Linux /proc), read without side effects: shared by the
local backend (a run's session) and the dev cluster (its daemons' start times)."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state, ppid, pgrp, session, ...),
    None when the process is gone or unreadable."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return raw[raw.rfind(")") + 2 :].split()


def running(fields: list[str] | None) -> bool:
    """A process's stat fields say it runs: there, and not a zombie (an exited process its
    parent has not reaped, which no signal can stop)."""
    return fields is not None and fields[0] not in {"Z", "X"}


def session_members(sid: int) -> list[int]:
    """The running processes of session `sid` ([] without /proc)."""
    if not PROC.is_dir():
        return []
    pids = (int(e.name) for e in PROC.iterdir() if e.name.isdigit())
    # fields: state ppid pgrp session ...
    return [p for p in pids if running(f := stat_fields(p)) and len(f) > 3 and f[3] == str(sid)]
