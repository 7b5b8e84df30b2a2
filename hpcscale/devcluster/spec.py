"""What a local cluster looks like (`ClusterSpec`): its size, names and port plan, saved in the
state dir so later commands agree with `up`.

Ports sit in a private block (default 17000–17099, all on 127.0.0.1) far from SLURM's defaults
(6817–6819) and from Linux's ephemeral range, so the test cluster never meets a real one.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcscale.devcluster.probes import port_free
from hpcscale.model.errors import UsageError

DEFAULT_PORT_BASE = 17000
MAX_NODES = 64
ENFORCE_WORDS = {"associations", "limits", "nojobs", "nosteps", "qos", "safe", "wckeys", "all"}
# Port plan: slurmd of node i on base+i, slurmctld base+90, slurmdbd base+91, MariaDB base+92.
CTLD_OFFSET, DBD_OFFSET, MYSQL_OFFSET = 90, 91, 92
# Environment a job needs so Open MPI ranks on different virtual nodes (one real host) talk over
# TCP on loopback: shared memory between virtual nodes crashes.
JOB_MPI_ENV = {
    "OMPI_MCA_btl": "self,tcp",
    "OMPI_MCA_btl_tcp_if_include": "lo",
    "OMPI_MCA_oob_tcp_if_include": "lo",
}


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """$HPCSCALE_CLUSTER_DIR, else the user's data dir (XDG) /hpcscale/cluster."""
    env = os.environ if environ is None else environ
    if env.get("HPCSCALE_CLUSTER_DIR"):
        return Path(env["HPCSCALE_CLUSTER_DIR"]).expanduser().absolute()
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser().absolute() / "hpcscale" / "cluster"


@dataclass(frozen=True)
class ClusterSpec:
    """The knobs of one local cluster; saved in the state dir so later commands agree with `up`."""

    nodes: int = 4
    cpus_per_node: int = 4
    memory_mb: int = 4096
    port_base: int = DEFAULT_PORT_BASE
    cluster_name: str = "hpcscale"
    partition: str = "debug"
    slurmd_timeout_s: int = 30
    max_array_size: int = 1001  # SLURM's default, so tests meet the arrays users meet
    accounting_enforce: str = ""  # AccountingStorageEnforce, e.g. "associations,limits,qos"
    db_password: str = field(default_factory=lambda: secrets.token_hex(12), repr=False)
    hostname: str = field(default_factory=lambda: socket.gethostname().split(".")[0])

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise UsageError(f"--nodes must be between 1 and {MAX_NODES}, got {self.nodes}")
        if self.cpus_per_node < 1 or self.memory_mb < 1:
            raise UsageError("cpus per node and memory must be positive")
        if not 1024 <= self.port_base <= 65535 - 100:
            raise UsageError(f"port base {self.port_base} must be between 1024 and 65435")
        if not 0 <= self.max_array_size <= 4000001:  # slurm.conf's bounds
            raise UsageError(f"MaxArraySize must be 0..4000001, got {self.max_array_size}")
        bad = set(filter(None, self.accounting_enforce.split(","))) - ENFORCE_WORDS
        if bad:
            raise UsageError(f"AccountingStorageEnforce: unknown {', '.join(sorted(bad))}")
        if not self.cluster_name.isalnum() or not self.cluster_name.islower():
            raise UsageError(f"cluster name must be lower-case letters/digits: {self.cluster_name}")

    @property
    def node_names(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    @property
    def daemons(self) -> list[str]:
        """Every daemon's name, in start order."""
        return ["munged", "mariadbd", "slurmdbd", "slurmctld"] + [
            f"slurmd-{n}" for n in self.node_names
        ]

    def slurmd_port(self, index: int) -> int:
        return self.port_base + index

    @property
    def ctld_port(self) -> int:
        return self.port_base + CTLD_OFFSET

    @property
    def dbd_port(self) -> int:
        return self.port_base + DBD_OFFSET

    @property
    def mysql_port(self) -> int:
        return self.port_base + MYSQL_OFFSET

    def ports(self) -> dict[str, int]:
        """daemon -> the TCP port it listens on (munged listens on a Unix socket only)."""
        plan = {"mariadbd": self.mysql_port, "slurmdbd": self.dbd_port, "slurmctld": self.ctld_port}
        for i, node in enumerate(self.node_names, start=1):
            plan[f"slurmd-{node}"] = self.slurmd_port(i)
        return plan

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterSpec:
        return cls(**json.loads(text))


def port_block_free(base: int) -> bool:
    """Whether every port a cluster at `base` could use (slurmd base..base+MAX_NODES, slurmctld,
    slurmdbd and MariaDB) can be bound on 127.0.0.1 now."""
    fixed = (CTLD_OFFSET, DBD_OFFSET, MYSQL_OFFSET)
    return all(port_free(base + off) for off in [*range(MAX_NODES + 1), *fixed])


def first_free_port_base(candidates: Iterable[int]) -> int | None:
    """The first port block among `candidates` that no other cluster is using."""
    return next((base for base in candidates if port_block_free(base)), None)
