"""Where a run's job output lands, by backend: the collector (a command's figures), status and
the failure reasons all look for the same files."""

from __future__ import annotations

from pathlib import Path

LOCAL_OUT = "local.out"  # the local backend's log of the whole job (all ranks)
SLURM_OUT_GLOB = "slurm-*.out"  # the job script's own, one per attempt


def slurm_outputs(run_dir: str | Path) -> list[Path]:
    """The run's slurm-<job>.out files, oldest first (a resubmitted run has one per attempt)."""
    return sorted(Path(run_dir).glob(SLURM_OUT_GLOB), key=lambda p: p.stat().st_mtime_ns)


def job_output(run_dir: str | Path) -> Path | None:
    """The newest output of the run's job, whichever backend wrote it (a run submitted again
    on another backend with --force has both)."""
    outs = slurm_outputs(run_dir)
    local = Path(run_dir) / LOCAL_OUT
    if local.is_file():
        outs.append(local)
    return max(outs, key=lambda p: p.stat().st_mtime_ns) if outs else None
