"""A real SLURM cluster on this machine: munged, MariaDB, slurmdbd, slurmctld and N slurmd.

Every daemon runs in the foreground of its own session with its pid recorded under
`<state_dir>/pids/`; `down` signals exactly those pids after checking /proc that each still is
the program we started. All daemons listen on 127.0.0.1 ports from `ClusterSpec.port_base`.
Init systems are not used (there is none in containers); everything runs as root because
slurmd must start job steps as the submitting user.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcscale.backends.slurm import procs
from hpcscale.backends.slurm.config import (
    JOB_MPI_ENV,
    ClusterSpec,
    Layout,
    default_state_dir,
    render_slurm_conf,
    render_slurmdbd_conf,
)
from hpcscale.backends.slurm.daemons import (
    MARIADB_TUNING,
    Progress,
    Starter,
    log_of,
    slurm_cmd,
)
from hpcscale.backends.slurm.probes import port_free
from hpcscale.core.shell import quote
from hpcscale.errors import BackendError, HpcscaleError, UsageError

# program -> Debian package that ships it (for the "run make setup" message)
REQUIRED_PROGRAMS = {
    "munged": "munge",
    "mungekey": "munge",
    "munge": "munge",
    "mariadbd": "mariadb-server",
    "mariadb-install-db": "mariadb-server",
    "mariadb": "mariadb-client",
    "slurmdbd": "slurmdbd",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sinfo": "slurm-client",
    "squeue": "slurm-client",
    "scancel": "slurm-client",
    "scontrol": "slurm-client",
    "cc": "gcc",  # builds the loopback shim (see loopback.py)
}
STOP_TIMEOUT_S = 15.0
UNIX_SOCKET_MAX = 107


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

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["spec"].pop("db_password", None)
        data["env"] = self.env
        data["job_env"] = self.job_env
        return data


# ---------------------------------------------------------------- helpers


def _search_path() -> str:
    # The daemons live in sbin, which a non-login PATH may lack.
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin"


def check_programs(search_path: str | None = None) -> dict[str, str]:
    """Absolute paths of every program we run, or one error listing all that are missing."""
    path = search_path if search_path is not None else _search_path()
    found = {p: shutil.which(p, path=path) for p in REQUIRED_PROGRAMS}
    missing = sorted({REQUIRED_PROGRAMS[p] for p, path in found.items() if path is None})
    if missing:
        raise HpcscaleError(
            f"the local SLURM cluster needs the Debian packages {' '.join(missing)} "
            "(missing programs: "
            + ", ".join(p for p, path in found.items() if path is None)
            + "); run `make setup`"
        )
    return {p: path for p, path in found.items() if path}


@contextlib.contextmanager
def _locked(lay: Layout) -> Iterator[None]:
    """One up/down at a time per state dir (a second one waits)."""
    lay.root.mkdir(parents=True, exist_ok=True)
    with open(lay.lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _daemon_names(spec: ClusterSpec) -> list[str]:
    return ["munged", "mariadbd", "slurmdbd", "slurmctld"] + [
        f"slurmd-{n}" for n in spec.node_names
    ]


# ---------------------------------------------------------------- the cluster


class LocalCluster:
    """One local cluster, identified by its state directory."""

    def __init__(self, state_dir: Path | str | None = None) -> None:
        self.lay = Layout(
            Path(state_dir).expanduser().absolute() if state_dir else default_state_dir()
        )

    # -- state on disk

    def load_spec(self) -> ClusterSpec | None:
        try:
            return ClusterSpec.from_json(self.lay.marker.read_text())
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise HpcscaleError(
                f"{self.lay.marker} is damaged ({exc}); run `down --purge`"
            ) from exc

    def records(self) -> dict[str, procs.ProcRecord]:
        out: dict[str, procs.ProcRecord] = {}
        if self.lay.pids.is_dir():
            for path in sorted(self.lay.pids.glob("*.json")):
                rec = procs.ProcRecord.load(path)
                if rec is not None:
                    out[rec.name] = rec
        return out

    def running(self) -> dict[str, procs.ProcRecord]:
        """Recorded daemons that are alive and provably ours."""
        return {name: rec for name, rec in self.records().items() if procs.is_ours(rec)}

    # -- up

    def up(self, progress: Progress | None = None, **settings: Any) -> ClusterInfo:
        """Start whatever is not running (idempotent; repairs a half-up cluster).

        `settings` are `ClusterSpec` fields (nodes, cpus_per_node, memory_mb, port_base,
        cluster_name, partition, slurmd_timeout_s); None means "as saved, else the default".
        """
        say = progress or (lambda _msg: None)
        allowed = {f.name for f in dataclasses.fields(ClusterSpec)} - {"db_password", "hostname"}
        unknown = set(settings) - allowed
        if unknown:
            raise UsageError(f"unknown cluster settings: {', '.join(sorted(unknown))}")
        self._check_state_dir()
        self._merge_spec(settings)  # bad settings fail here, before anything is written
        if os.geteuid() != 0:
            raise HpcscaleError(
                "the local SLURM cluster must run as root (slurmd starts job steps as the "
                "submitting user)"
            )
        exe = check_programs()
        with _locked(self.lay):
            spec = self._settle_spec(**settings)
            running = self.running()
            wanted = _daemon_names(spec)
            if all(name in running for name in wanted):
                say(f"already up ({len(wanted)} daemons running)")
                return self.status()
            self._check_ports(spec, running)
            self._prepare_files(spec, exe, say)
            try:
                Starter(self.lay, spec, exe, running, say).start_all()
            except BackendError as exc:
                raise BackendError(
                    f"{exc}\nThe daemons that did start keep running (`hpcscale cluster status`); "
                    "`hpcscale cluster down` stops them, `up` again retries."
                ) from exc
        return self.status()

    def _check_state_dir(self) -> None:
        root = self.lay.root
        if root.exists() and not root.is_dir():
            raise UsageError(f"cluster state dir {root} is a file")
        if root.is_dir() and not self.lay.marker.exists():
            extra = [p.name for p in root.iterdir() if p.name != self.lay.lock.name]
            if extra:
                raise UsageError(
                    f"{root} is not empty and is not a hpcscale cluster directory "
                    "(no cluster.json); choose another --state-dir"
                )
        longest = max(len(str(self.lay.mysql_socket)), len(str(self.lay.munge_socket)))
        if longest > UNIX_SOCKET_MAX:
            raise UsageError(
                f"cluster state dir {root} is too long for Unix socket paths "
                f"({longest} > {UNIX_SOCKET_MAX} characters); choose a shorter --state-dir"
            )

    def _merge_spec(self, overrides: dict[str, Any]) -> tuple[ClusterSpec | None, ClusterSpec]:
        """(saved, wanted): the saved settings with the given ones applied; validates."""
        saved = self.load_spec()
        given = {k: v for k, v in overrides.items() if v is not None}
        return saved, dataclasses.replace(saved, **given) if saved else ClusterSpec(**given)

    def _settle_spec(self, **overrides: Any) -> ClusterSpec:
        saved, spec = self._merge_spec(overrides)
        given = {k: v for k, v in overrides.items() if v is not None}
        if saved is not None and spec != saved:
            alive = self.running()
            if alive:
                changed = ", ".join(
                    f"{k}={getattr(saved, k)}->{v}"
                    for k, v in given.items()
                    if getattr(saved, k) != v
                )
                raise UsageError(
                    f"the cluster in {self.lay.root} is running with different settings "
                    f"({changed}); run `hpcscale cluster down` first"
                )
        if spec != saved:
            self.lay.root.mkdir(parents=True, exist_ok=True)
            procs.atomic_write(self.lay.marker, spec.to_json(), mode=0o600)
        return spec

    def _prepare_files(self, spec: ClusterSpec, exe: dict[str, str], say: Progress) -> None:
        lay = self.lay
        lay.root.chmod(0o755)  # munged wants its socket's directories reachable by all
        for d, mode in (
            (lay.etc, 0o755),
            (lay.run, 0o755),
            (lay.munge_dir, 0o700),
            (lay.ctld_dir, 0o700),
            (lay.log, 0o755),
            (lay.pids, 0o755),
            (lay.nodes_dir, 0o755),
        ):
            d.mkdir(exist_ok=True)
            d.chmod(mode)
        for node in spec.node_names:
            for sub in ("spool", "tmp"):
                (lay.node_dir(node) / sub).mkdir(parents=True, exist_ok=True)
        procs.atomic_write(lay.slurm_conf, render_slurm_conf(spec, lay), mode=0o644)
        procs.atomic_write(lay.slurmdbd_conf, render_slurmdbd_conf(spec, lay), mode=0o600)
        procs.atomic_write(lay.etc / "plugstack.conf", "", mode=0o644)
        if not lay.munge_key.exists():
            _run_checked(
                [exe["mungekey"], "--create", f"--keyfile={lay.munge_key}"], "mungekey", lay.log
            )
            lay.munge_key.chmod(0o400)
        if not (lay.db_dir / "mysql").is_dir():
            say("initialising the accounting database (first up only)")
            self._install_db(exe)

    def _install_db(self, exe: dict[str, str]) -> None:
        # Into a temporary dir renamed at the end, so a crash never leaves a half-made datadir.
        tmp = self.lay.root / "db.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(self.lay.db_dir, ignore_errors=True)
        _run_checked(
            [
                exe["mariadb-install-db"],
                "--no-defaults",
                f"--datadir={tmp}",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
                "--user=root",
                *MARIADB_TUNING,
            ],
            "mariadb-install-db",
            self.lay.log,
            timeout=120,
        )
        tmp.chmod(0o700)
        os.replace(tmp, self.lay.db_dir)

    def _check_ports(self, spec: ClusterSpec, running: dict[str, procs.ProcRecord]) -> None:
        plan = {"mariadbd": [spec.mysql_port], "slurmdbd": [spec.dbd_port]}
        plan["slurmctld"] = [spec.ctld_port]
        for i, node in enumerate(spec.node_names, start=1):
            plan[f"slurmd-{node}"] = [spec.slurmd_port(i)]
        busy = [
            f"{port} ({name})"
            for name, ports in plan.items()
            if name not in running
            for port in ports
            if not port_free(port)
        ]
        if busy:
            raise BackendError(
                "ports already in use on 127.0.0.1: "
                + ", ".join(busy)
                + f"; another cluster may be running. Pick another --port-base (now "
                f"{spec.port_base}) or stop it"
            )

    # -- status

    def status(self) -> ClusterInfo:
        spec = self.load_spec()
        lay = self.lay
        records = self.records()
        names = _daemon_names(spec) if spec else sorted(records)
        daemons = []
        for name in names:
            rec = records.get(name)
            alive = rec is not None and procs.is_ours(rec)
            daemons.append(DaemonStatus(name, rec.pid if rec else None, alive, log_of(lay, name)))
        ctld_alive = any(d.name == "slurmctld" and d.alive for d in daemons)
        nodes = self._nodes() if ctld_alive else []
        return ClusterInfo(
            state_dir=str(lay.root),
            slurm_conf=str(lay.slurm_conf),
            cluster_name=spec.cluster_name if spec else "",
            partition=spec.partition if spec else "",
            up=bool(daemons) and all(d.alive for d in daemons),
            daemons=daemons,
            nodes=nodes,
            spec=dataclasses.asdict(spec) if spec else {},
        )

    def _nodes(self) -> list[NodeStatus]:
        try:
            res = slurm_cmd(self.lay, "sinfo", "-h", "-N", "-o", "%N|%T|%c|%m", timeout=5)
        except subprocess.TimeoutExpired:
            return []
        out = []
        for line in res.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4:
                name, state, cpus, mem = parts
                out.append(NodeStatus(name, state, int(cpus), int(mem.rstrip("+") or 0)))
        return out

    # -- down

    def down(self, purge: bool = False, progress: Progress | None = None) -> dict[str, str]:
        """Stop the recorded daemons (cancelling jobs first); `purge` also wipes state and DB."""
        say = progress or (lambda _msg: None)
        lay = self.lay
        if not lay.marker.exists():
            if lay.root.exists() and any(p.name != lay.lock.name for p in lay.root.iterdir()):
                raise UsageError(f"{lay.root} is not a hpcscale cluster directory; not touching it")
            say(f"no cluster in {lay.root}")
            if purge:  # at most our own lock file is left
                shutil.rmtree(lay.root, ignore_errors=True)
            return {}
        outcome: dict[str, str] = {}
        with _locked(lay):
            records = self.records()
            if not records:
                say(f"nothing was running in {lay.root}")
            ctld = records.get("slurmctld")
            if ctld is not None and procs.is_ours(ctld):
                self._cancel_jobs(say)
            spec = self.load_spec()
            order = _daemon_names(spec) if spec else []
            order += [n for n in records if n not in order]
            stages = [
                [n for n in order if n.startswith("slurmd-")],
                ["slurmctld"],
                ["slurmdbd"],
                ["mariadbd", "munged"],
            ]
            stages.append([n for n in order if not any(n in s for s in stages)])
            for stage in stages:
                recs = [records[n] for n in stage if n in records]
                if not recs:
                    continue
                result = procs.stop(recs, timeout=STOP_TIMEOUT_S)
                for rec in recs:
                    say(f"{rec.name} (pid {rec.pid}): {result[rec.name]}")
                    outcome[rec.name] = result[rec.name]
                    if not procs.is_ours(rec):
                        lay.record(rec.name).unlink(missing_ok=True)
            left = [n for n, r in self.records().items() if procs.is_ours(r)]
            if left:
                raise BackendError(f"could not stop: {', '.join(left)}")
            if purge:
                shutil.rmtree(lay.root)
                say(f"removed {lay.root} (state and database)")
        return outcome

    def _cancel_jobs(self, say: Progress) -> None:
        """Jobs' slurmstepd outlive slurmd; end them through SLURM before stopping daemons."""
        try:
            res = slurm_cmd(self.lay, "squeue", "-h", "-o", "%A", timeout=10)
            ids = sorted(set(res.stdout.split()))
            if not ids:
                return
            say(f"cancelling {len(ids)} job(s)")
            slurm_cmd(self.lay, "scancel", *ids, timeout=10)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                res = slurm_cmd(self.lay, "squeue", "-h", "-t", "R,CG,S,CF", "-o", "%A", timeout=10)
                if res.returncode == 0 and not res.stdout.strip():
                    return
                time.sleep(0.2)
            say("some jobs did not end within 15 s; stopping daemons anyway")
        except subprocess.TimeoutExpired:
            say("squeue/scancel timed out; stopping daemons anyway")


def _run_checked(argv: list[str], what: str, log_dir: Path, timeout: float = 30) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{what}.out"
    with log.open("wb") as out:
        try:
            res = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BackendError(f"{what} did not finish in {timeout:.0f} s; see {log}") from exc
    if res.returncode != 0:
        raise BackendError(f"{what} failed (exit {res.returncode}); {log}:\n{procs.tail(log)}")


# ---------------------------------------------------------------- for the rest of hpcscale


def up(state_dir: Path | str | None = None, nodes: int | None = None, **kw: Any) -> ClusterInfo:
    """Bring the cluster in `state_dir` (default: `default_state_dir()`) up; see LocalCluster.up."""
    return LocalCluster(state_dir).up(nodes=nodes, **kw)


def down(state_dir: Path | str | None = None, purge: bool = False, **kw: Any) -> dict[str, str]:
    return LocalCluster(state_dir).down(purge=purge, **kw)


def status(state_dir: Path | str | None = None) -> ClusterInfo:
    return LocalCluster(state_dir).status()


def slurm_conf_for_hpcscale(environ: dict[str, str] | None = None) -> str | None:
    """Which slurm.conf hpcscale's own sbatch/squeue/sacct (and submitit) should use.

    An explicit SLURM_CONF wins. Else HPCSCALE_CLUSTER_DIR names a local cluster (its slurm.conf
    must exist). Else the default local cluster, but only while its slurmctld is running. Else
    None: the system's SLURM configuration.
    """
    env = os.environ if environ is None else environ
    if env.get("SLURM_CONF"):
        return env["SLURM_CONF"]
    if env.get("HPCSCALE_CLUSTER_DIR"):
        conf = Layout(default_state_dir(env)).slurm_conf
        if not conf.exists():
            raise UsageError(
                f"HPCSCALE_CLUSTER_DIR={env['HPCSCALE_CLUSTER_DIR']} holds no cluster; "
                "run `hpcscale cluster up`"
            )
        return str(conf)
    cluster = LocalCluster(default_state_dir(env))
    if "slurmctld" in cluster.running():
        return str(cluster.lay.slurm_conf)
    return None


def activate(environ: dict[str, str] | None = None) -> str | None:
    """Set SLURM_CONF in this process (so submitit's sacct calls reach the same cluster)."""
    env: Any = os.environ if environ is None else environ
    conf = slurm_conf_for_hpcscale(env)
    if conf:
        env["SLURM_CONF"] = conf
    return conf
