"""Where a run's job output lands, by scheduler: the collector (a command's figures), status and
the failure reasons all look for the same files. Each scheduler names its jobs' output in
hpcscale.model.registry.SCHEDULERS (`slurm-<job>.out`, `local.out`).

Only regular files count: a name that is a dangling link, a directory or a device is no output
(a run writes its own directory: what it leaves there must not stop collect or status)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hpcscale.model.registry import SCHEDULERS


def output_globs() -> dict[str, str]:
    """Scheduler -> the name its jobs' output takes in a run directory."""
    return {name: line.output for name, line in SCHEDULERS.items()}


def _mtime(path: Path) -> int | None:
    """The file's mtime (ns) when it is a regular file (links followed), else None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns if stat.S_ISREG(st.st_mode) else None


def scheduler_outputs(run_dir: str | Path, scheduler: str) -> list[Path]:
    """The run's job outputs written under `scheduler`, oldest first (a run submitted again
    has one per attempt where the name holds the job id)."""
    pattern = output_globs()[scheduler]
    found = [(t, p) for p in Path(run_dir).glob(pattern) if (t := _mtime(p)) is not None]
    return [p for _, p in sorted(found, key=lambda tp: (tp[0], tp[1].name))]


def all_outputs(run_dir: str | Path) -> list[Path]:
    """Every scheduler's job outputs in the run directory, by name (what collect fingerprints)."""
    return sorted(p for pattern in output_globs().values() for p in Path(run_dir).glob(pattern))


def job_output(run_dir: str | Path) -> Path | None:
    """The newest output of the run's job, whichever scheduler ran it (a run submitted again
    on another backend with --force has both)."""
    outs = [
        (t, p)
        for name in output_globs()
        for p in scheduler_outputs(run_dir, name)
        if (t := _mtime(p)) is not None
    ]
    return max(outs, key=lambda tp: tp[0])[1] if outs else None


def output_names() -> str:
    """The names job outputs take, for a message ("local.out or slurm-*.out")."""
    return " or ".join(sorted(output_globs().values()))
