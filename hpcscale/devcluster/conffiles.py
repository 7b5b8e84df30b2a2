"""The files written from a spec and a layout: slurm.conf, slurmdbd.conf and the SQL that
creates the database user slurmdbd logs in as."""

from __future__ import annotations

from dataclasses import asdict
from string import Template

from hpcscale.devcluster.layout import Layout
from hpcscale.devcluster.spec import ClusterSpec

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
$enforce_line
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
ReturnToService=2
# A job on a failed node ends NODE_FAIL (visible, resubmittable) instead of being requeued.
JobRequeue=0
SlurmdTimeout=$slurmd_timeout_s
InactiveLimit=0
KillWait=5
# SLURM's default (what users of a stock cluster meet): array indices 0..1000.
MaxArraySize=$max_array_size
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
        # SLURM's default is no enforcement; a site's limits (MaxSubmitJobs, ...) need it
        "enforce_line": (
            f"AccountingStorageEnforce={spec.accounting_enforce}"
            if spec.accounting_enforce
            else "# AccountingStorageEnforce: not set (SLURM's default: limits not enforced)"
        ),
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
