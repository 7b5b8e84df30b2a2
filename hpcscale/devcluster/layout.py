"""Where a local cluster's files live: every path under one state directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    """Every path of a cluster, all under one state directory."""

    root: Path

    marker = property(lambda self: self.root / "cluster.json")
    # the file hpcscale.state.lock's lock takes in a directory: one up/down at a time
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

    def daemon_log(self, daemon: str) -> Path:
        """The daemon's own log (its stdout and stderr go to `<name>.out` beside it)."""
        return self.log / f"{daemon}.log"
