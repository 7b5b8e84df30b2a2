"""What `status` reports about a local cluster, and how a shell is pointed at it: the SLURM
backend finds a cluster only through SLURM_CONF, so every report says how to set it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcscale.devcluster.client import slurm
from hpcscale.devcluster.layout import Layout
from hpcscale.devcluster.spec import JOB_MPI_ENV, default_state_dir
from hpcscale.util.shell import quote


@dataclass
class DaemonStatus:
    name: str
    pid: int | None
    alive: bool
    log: str


@dataclass
class NodeStatus:
    name: str
    state: str
    cpus: int
    memory_mb: int


@dataclass
class ClusterInfo:
    """What a caller needs to use the cluster: `env` for SLURM client subprocesses."""

    state_dir: str
    slurm_conf: str
    cluster_name: str
    partition: str
    up: bool
    daemons: list[DaemonStatus]
    nodes: list[NodeStatus] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """Variables for sbatch/squeue/sacct/srun so they talk to this cluster."""
        return {"SLURM_CONF": self.slurm_conf}

    @property
    def job_env(self) -> dict[str, str]:
        """Variables a job's MPI needs here (ranks on virtual nodes of one host)."""
        return dict(JOB_MPI_ENV)

    @property
    def export_line(self) -> str:
        return f"export SLURM_CONF={quote(str(self.slurm_conf))}"  # it is eval'd

    @property
    def up_command(self) -> str:
        """`eval` it: starts (or repairs) this cluster and points the shell at it."""
        option = ""
        if Path(self.state_dir) != default_state_dir():
            option = f" --state-dir {quote(self.state_dir)}"
        return f'eval "$(hpcscale cluster up{option})"'

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["spec"].pop("db_password", None)
        data["env"] = self.env
        data["job_env"] = self.job_env
        return data


def read_nodes(lay: Layout) -> list[NodeStatus]:
    """The nodes as slurmctld sees them; empty when it does not answer."""
    res = slurm(lay, "sinfo", "-h", "-N", "-o", "%N|%T|%c|%m", timeout=5)
    out = []
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4:
            name, state, cpus, mem = parts
            out.append(NodeStatus(name, state, int(cpus), int(mem.rstrip("+") or 0)))
    return out
