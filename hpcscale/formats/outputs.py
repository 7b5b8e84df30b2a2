"""Where a run's job output lands, by backend: the collector (a command's figures), status and
the failure reasons all look for the same files.

Only regular files count: a name that is a dangling link, a directory or a device is no output
(a run writes its own directory: what it leaves there must not stop collect or status)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

LOCAL_OUT = "local.out"  # the local backend's log of the whole job (all ranks)
SLURM_OUT_GLOB = "slurm-*.out"  # the job script's own, one per attempt


def _mtime(path: Path) -> int | None:
    """The file's mtime (ns) when it is a regular file (links followed), else None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns if stat.S_ISREG(st.st_mode) else None


def slurm_outputs(run_dir: str | Path) -> list[Path]:
    """The run's slurm-<job>.out files, oldest first (a resubmitted run has one per attempt)."""
    found = [(t, p) for p in Path(run_dir).glob(SLURM_OUT_GLOB) if (t := _mtime(p)) is not None]
    return [p for _, p in sorted(found, key=lambda tp: (tp[0], tp[1].name))]


def job_output(run_dir: str | Path) -> Path | None:
    """The newest output of the run's job, whichever backend wrote it (a run submitted again
    on another backend with --force has both)."""
    outs = [(t, p) for p in slurm_outputs(run_dir) if (t := _mtime(p)) is not None]
    local = Path(run_dir) / LOCAL_OUT
    if (t := _mtime(local)) is not None:
        outs.append((t, local))
    return max(outs, key=lambda tp: tp[0])[1] if outs else None
