"""How the local cluster's daemons are started, in dependency order, and when each counts as
ready."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from hpcscale.devcluster import loopback, procs
from hpcscale.devcluster.client import slurm
from hpcscale.devcluster.conffiles import mysql_setup_sql
from hpcscale.devcluster.layout import Layout
from hpcscale.devcluster.logs import excerpt
from hpcscale.devcluster.probes import tcp_open, unix_open
from hpcscale.devcluster.spec import ClusterSpec
from hpcscale.model.errors import BackendError

Progress = Callable[[str], None]

# Small, fast and not durable: this database is a scratch pad for sacct.
MARIADB_TUNING = [
    "--innodb-log-file-size=8M",
    "--innodb-buffer-pool-size=32M",
    "--innodb-data-file-path=ibdata1:4M:autoextend",
    "--skip-log-bin",
]
MARIADB_RUN_TUNING = [
    "--innodb-flush-log-at-trx-commit=2",
    "--skip-innodb-doublewrite",
    "--max-connections=200",
]
READY_TIMEOUT_S = 45.0


class Starter:
    """Starts the missing daemons in dependency order and waits until each one serves."""

    def __init__(
        self,
        lay: Layout,
        spec: ClusterSpec,
        exe: dict[str, str],
        running: dict[str, procs.ProcRecord],
        say: Progress,
    ) -> None:
        self.lay = lay
        self.spec = spec
        self.exe = exe
        self.running = running
        self.say = say
        self.env = {**os.environ, "SLURM_CONF": str(lay.slurm_conf)}
        shim = str(loopback.shim(self.lay.lib))
        preload = " ".join(p for p in (shim, os.environ.get("LD_PRELOAD", "")) if p)
        self.slurm_env = {**self.env, "LD_PRELOAD": preload}

    def start_all(self) -> None:
        lay, spec, exe = self.lay, self.spec, self.exe
        t0 = time.monotonic()
        munged = self._start(
            "munged",
            [
                exe["munged"],
                "--foreground",
                "--force",  # as root, in a private dir: skip the system-path ownership checks
                f"--socket={lay.munge_socket}",
                f"--key-file={lay.munge_key}",
                f"--pid-file={lay.run / 'munged.pid'}",
                f"--log-file={lay.log / 'munged.log'}",
                f"--seed-file={lay.munge_dir / 'munged.seed'}",
            ],
        )
        mariadbd = self._start(
            "mariadbd",
            [
                exe["mariadbd"],
                "--no-defaults",
                f"--datadir={lay.db_dir}",
                f"--socket={lay.mysql_socket}",
                f"--pid-file={lay.run / 'mariadbd.pid'}",
                f"--port={spec.mysql_port}",
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-name-resolve",
                f"--log-error={lay.log / 'mariadbd.log'}",
                *MARIADB_TUNING,
                *MARIADB_RUN_TUNING,
            ],
        )
        self._wait(munged, self._munge_ok)
        self._wait(mariadbd, lambda: unix_open(lay.mysql_socket) and tcp_open(spec.mysql_port))
        if mariadbd is not None:
            self._setup_db()
        dbd = self._start("slurmdbd", [exe["slurmdbd"], "-D"])
        self._wait(dbd, lambda: tcp_open(spec.dbd_port))
        ctld = self._start("slurmctld", [exe["slurmctld"], "-D", "-f", str(lay.slurm_conf)])
        self._wait(ctld, lambda: tcp_open(spec.ctld_port))
        if ctld is not None and any(f"slurmd-{n}" in self.running for n in spec.node_names):
            # A new slurmctld marks running slurmd "unknown" until its first ping (~5 s);
            # asking them to reconfigure makes them register at once.
            slurm(lay, "scontrol", "reconfigure", timeout=10)  # best effort
        slurmds = [
            self._start(
                f"slurmd-{node}", [exe["slurmd"], "-D", "-N", node, "-f", str(lay.slurm_conf)]
            )
            for node in spec.node_names
        ]
        self._wait_nodes([r for r in slurmds if r is not None])
        self.say(f"up in {time.monotonic() - t0:.1f} s")

    def _start(self, name: str, argv: list[str]) -> procs.ProcRecord | None:
        """None when it already runs (and is ours). SLURM daemons get the loopback shim."""
        if name in self.running:
            self.say(f"{name}: already running (pid {self.running[name].pid})")
            return None
        out = self.lay.log / f"{name}.out"
        env = self.slurm_env if name.startswith("slurm") else self.env
        rec = procs.spawn(name, argv, out, env, cwd=self.lay.root)
        rec.save(self.lay.record(name))
        return rec

    def _wait(self, rec: procs.ProcRecord | None, ready: Callable[[], bool]) -> None:
        if rec is None:
            return
        t0 = time.monotonic()
        deadline = t0 + READY_TIMEOUT_S
        while True:
            if ready():
                self.say(f"{rec.name}: ready (pid {rec.pid}, {time.monotonic() - t0:.1f} s)")
                return
            if not procs.is_alive(rec.pid):
                raise BackendError(failure(rec, self.lay, "exited during start-up"))
            if time.monotonic() > deadline:
                raise BackendError(
                    failure(rec, self.lay, f"not ready after {READY_TIMEOUT_S:.0f} s")
                )
            time.sleep(0.05)

    def _munge_ok(self) -> bool:
        res = subprocess.run(
            [self.exe["munge"], "-n", f"--socket={self.lay.munge_socket}"],
            capture_output=True,
            check=False,
            timeout=5,
        )
        return res.returncode == 0

    def _setup_db(self) -> None:
        res = subprocess.run(
            [
                self.exe["mariadb"],
                "--no-defaults",
                "--protocol=socket",
                f"--socket={self.lay.mysql_socket}",
                "-u",
                "root",
            ],
            input=mysql_setup_sql(self.spec),
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        if res.returncode != 0:
            raise BackendError(f"creating the slurm DB user failed: {res.stderr.strip()}")

    def _wait_nodes(self, started: list[procs.ProcRecord]) -> None:
        """All nodes registered with slurmctld and usable (idle, or busy with earlier jobs)."""
        t0 = time.monotonic()
        deadline = t0 + READY_TIMEOUT_S
        expected = set(self.spec.node_names)
        states: dict[str, str] = {}
        while True:
            res = slurm(self.lay, "sinfo", "-h", "-N", "-o", "%N|%T", timeout=5)
            if res.ok:
                states = dict(line.split("|", 1) for line in res.stdout.splitlines() if "|" in line)
            ready = {n for n, s in states.items() if _usable(s)}
            if expected <= ready:
                self.say(f"{len(expected)} nodes ready ({time.monotonic() - t0:.1f} s)")
                return
            dead = [r for r in started if not procs.is_alive(r.pid)]
            if dead:
                raise BackendError(failure(dead[0], self.lay, "exited during start-up"))
            if time.monotonic() > deadline:
                waiting = sorted(expected - ready)
                rec = next((r for r in started if r.name == f"slurmd-{waiting[0]}"), None)
                detail = failure(rec, self.lay, "did not register") if rec else ""
                raise BackendError(
                    f"nodes not ready after {READY_TIMEOUT_S:.0f} s: "
                    + ", ".join(f"{n}={states.get(n, 'missing')}" for n in waiting)
                    + (f"\n{detail}" if detail else "")
                )
            time.sleep(0.1)


def _usable(state: str) -> bool:
    base = state.rstrip("*~#!%$@^-+")
    return not state.endswith("*") and base in {
        "idle",
        "allocated",
        "mixed",
        "completing",
    }


def failure(rec: procs.ProcRecord, lay: Layout, what: str) -> str:
    """What went wrong, with the daemon's own log (else its captured output) to show why."""
    log = lay.daemon_log(rec.name)
    shown = log if log.exists() else Path(rec.log)
    text = f"{rec.name} (pid {rec.pid}) {what}; last lines of {shown}:\n{excerpt(shown)}"
    if shown != Path(rec.log):
        text += f"\n--- {rec.log}:\n{excerpt(rec.log, 5)}"
    return text
