"""SLURM: a local cluster for trying campaigns and for tests (`cluster`), and later the
submission backend."""

from __future__ import annotations

from hpcscale.backends.slurm.cluster import (
    ClusterInfo,
    LocalCluster,
    activate,
    down,
    slurm_conf_for_hpcscale,
    status,
    up,
)
from hpcscale.backends.slurm.config import JOB_MPI_ENV, ClusterSpec, default_state_dir

__all__ = [
    "JOB_MPI_ENV",
    "ClusterInfo",
    "ClusterSpec",
    "LocalCluster",
    "activate",
    "default_state_dir",
    "down",
    "slurm_conf_for_hpcscale",
    "status",
    "up",
]
