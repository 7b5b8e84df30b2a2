"""What must hold before `up` writes or starts anything: the programs are installed, the state
dir is ours (or empty) and short enough for socket paths, the ports are free."""

from __future__ import annotations

import os
import shutil
from collections.abc import Container

from hpcscale.devcluster.layout import Layout
from hpcscale.devcluster.probes import port_free
from hpcscale.devcluster.spec import ClusterSpec
from hpcscale.model.errors import BackendError, HpcscaleError, UsageError

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
UNIX_SOCKET_MAX = 107


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


def is_foreign(lay: Layout) -> bool:
    """The state dir holds files but no cluster.json: someone else's directory, not touched."""
    if not lay.root.is_dir() or lay.marker.exists():
        return False
    return any(p.name != lay.lock.name for p in lay.root.iterdir())


def check_state_dir(lay: Layout) -> None:
    root = lay.root
    if root.exists() and not root.is_dir():
        raise UsageError(f"cluster state dir {root} is a file")
    if is_foreign(lay):
        raise UsageError(
            f"{root} is not empty and is not a hpcscale cluster directory "
            "(no cluster.json); choose another --state-dir"
        )
    longest = max(len(str(lay.mysql_socket)), len(str(lay.munge_socket)))
    if longest > UNIX_SOCKET_MAX:
        raise UsageError(
            f"cluster state dir {root} is too long for Unix socket paths "
            f"({longest} > {UNIX_SOCKET_MAX} characters); choose a shorter --state-dir"
        )


def check_ports(spec: ClusterSpec, running: Container[str]) -> None:
    """The ports of the daemons about to start (not those `running`) are free on 127.0.0.1."""
    busy = [
        f"{port} ({name})"
        for name, port in spec.ports().items()
        if name not in running and not port_free(port)
    ]
    if busy:
        raise BackendError(
            "ports already in use on 127.0.0.1: "
            + ", ".join(busy)
            + f"; another cluster may be running. Pick another --port-base (now "
            f"{spec.port_base}) or stop it"
        )
