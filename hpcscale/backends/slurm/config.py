"""What a local cluster looks like (`ClusterSpec`), where its files live (`Layout`), and the
slurm.conf / slurmdbd.conf rendered from them.

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
from string import Template

from hpcscale.backends.slurm.probes import port_free
from hpcscale.errors import UsageError

DEFAULT_PORT_BASE = 17000
MAX_NODES = 64
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
    db_password: str = field(default_factory=lambda: secrets.token_hex(12), repr=False)
    hostname: str = field(default_factory=lambda: socket.gethostname().split(".")[0])

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise UsageError(f"--nodes must be between 1 and {MAX_NODES}, got {self.nodes}")
        if self.cpus_per_node < 1 or self.memory_mb < 1:
            raise UsageError("cpus per node and memory must be positive")
        if not 1024 <= self.port_base <= 65535 - 100:
            raise UsageError(f"port base {self.port_base} must be between 1024 and 65435")
        if not self.cluster_name.isalnum() or not self.cluster_name.islower():
            raise UsageError(f"cluster name must be lower-case letters/digits: {self.cluster_name}")

    # Port plan: slurmd of node i on base+i, slurmctld base+90, slurmdbd base+91, MariaDB base+92.
    @property
    def node_names(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    def slurmd_port(self, index: int) -> int:
        return self.port_base + index

    @property
    def ctld_port(self) -> int:
        return self.port_base + 90

    @property
    def dbd_port(self) -> int:
        return self.port_base + 91

    @property
    def mysql_port(self) -> int:
        return self.port_base + 92

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterSpec:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Layout:
    """Every path of a cluster, all under one state directory."""

    root: Path

    marker = property(lambda self: self.root / "cluster.json")
    lock = property(lambda self: self.root / ".lock")
    etc = property(lambda self: self.root / "etc")
    slurm_conf = property(lambda self: self.root / "etc" / "slurm.conf")
    slurmdbd_conf = property(lambda self: self.root / "etc" / "slurmdbd.conf")
    run = property(lambda self: self.root / "run")  # sockets: must be reachable by clients
    munge_socket = property(lambda self: self.root / "run" / "munge.sock")
    mysql_socket = property(lambda self: self.root / "run" / "mysql.sock")
    munge_dir = property(lambda self: self.root / "munge")
    munge_key = property(lambda self: self.root / "munge" / "munge.key")
    db_dir = property(lambda self: self.root / "db")
    ctld_dir = property(lambda self: self.root / "ctld")
    nodes_dir = property(lambda self: self.root / "nodes")
    log = property(lambda self: self.root / "log")
    pids = property(lambda self: self.root / "pids")
    lib = property(lambda self: self.root / "lib")

    def node_dir(self, node: str) -> Path:
        return self.nodes_dir / node

    def record(self, daemon: str) -> Path:
        return self.pids / f"{daemon}.json"


SLURM_CONF = Template("""\
# Written by `hpcscale cluster up`; regenerated on every up, do not edit.
ClusterName=$cluster_name
SlurmctldHost=$hostname(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_socket
CredType=cred/munge
StateSaveLocation=$ctld_dir
SlurmctldPidFile=$ctld_dir/slurmctld.pid
SlurmctldLogFile=$log/slurmctld.log
SlurmdSpoolDir=$nodes_dir/%n/spool
SlurmdPidFile=$nodes_dir/%n/slurmd.pid
SlurmdLogFile=$log/slurmd-%n.log
TmpFS=$nodes_dir/%n/tmp
PlugStackConfig=$etc/plugstack.conf
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
DependencyParameters=kill_invalid_depend
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
# For connections to slurmdbd this (not AuthInfo) names the munge socket.
AccountingStoragePass=$munge_socket
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
ReturnToService=2
# A job on a failed node ends NODE_FAIL (visible, resubmittable) instead of being requeued.
JobRequeue=0
SlurmdTimeout=$slurmd_timeout_s
InactiveLimit=0
KillWait=5
MaxArraySize=10001
MaxJobCount=20000
MailProg=/bin/true
SlurmctldDebug=info
SlurmdDebug=info
$node_line
PartitionName=$partition Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

SLURMDBD_CONF = Template("""\
# Written by `hpcscale cluster up`; regenerated on every up, do not edit.
AuthType=auth/munge
AuthInfo=socket=$munge_socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$run/slurmdbd.pid
LogFile=$log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$mysql_port
StorageUser=slurm
StoragePass=$db_password
StorageLoc=slurm_acct_db
""")


def _node_line(spec: ClusterSpec) -> str:
    """All virtual nodes on this host: one slurmd each, told apart by port and `%n` paths."""
    last = spec.nodes
    names = f"node[1-{last}]" if last > 1 else "node1"
    first_port, last_port = spec.slurmd_port(1), spec.slurmd_port(last)
    ports = f"[{first_port}-{last_port}]" if last > 1 else str(first_port)
    return (
        f"NodeName={names} NodeHostname={spec.hostname} NodeAddr=127.0.0.1 Port={ports} "
        f"CPUs={spec.cpus_per_node} Sockets=1 CoresPerSocket={spec.cpus_per_node} "
        f"ThreadsPerCore=1 RealMemory={spec.memory_mb} State=UNKNOWN"
    )


def _values(spec: ClusterSpec, lay: Layout) -> dict[str, object]:
    return {
        **asdict(spec),
        "node_line": _node_line(spec),
        "ctld_port": spec.ctld_port,
        "dbd_port": spec.dbd_port,
        "mysql_port": spec.mysql_port,
        **{
            k: str(getattr(lay, k))
            for k in ("munge_socket", "ctld_dir", "log", "nodes_dir", "etc", "run")
        },
    }


def render_slurm_conf(spec: ClusterSpec, lay: Layout) -> str:
    return SLURM_CONF.substitute(_values(spec, lay))


def render_slurmdbd_conf(spec: ClusterSpec, lay: Layout) -> str:
    return SLURMDBD_CONF.substitute(_values(spec, lay))


def mysql_setup_sql(spec: ClusterSpec) -> str:
    """Idempotent: the `slurm` DB user slurmdbd logs in as, for both names of loopback."""
    pw = spec.db_password  # hex only, safe inside quotes
    lines = []
    for host in ("localhost", "127.0.0.1"):
        lines += [
            f"CREATE USER IF NOT EXISTS 'slurm'@'{host}' IDENTIFIED BY '{pw}';",
            f"ALTER USER 'slurm'@'{host}' IDENTIFIED BY '{pw}';",
            f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{host}';",
        ]
    return "\n".join(lines) + "\n"


def port_block_free(base: int) -> bool:
    """Whether every port a cluster at `base` would use (slurmd base..base+64, slurmctld,
    slurmdbd and MariaDB at base+90..92) can be bound on 127.0.0.1 now."""
    return all(port_free(p) for p in [*range(base, base + 65), base + 90, base + 91, base + 92])


def first_free_port_base(candidates: Iterable[int]) -> int | None:
    """The first port block among `candidates` that no other cluster is using."""
    return next((base for base in candidates if port_block_free(base)), None)
