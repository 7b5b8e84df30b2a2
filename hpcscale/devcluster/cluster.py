"""A real SLURM cluster on this machine: munged, MariaDB, slurmdbd, slurmctld and N slurmd.

Every daemon runs in the foreground of its own session with its pid recorded under
`<state_dir>/pids/`; `down` signals exactly those pids after checking /proc that each still is
the program we started. All daemons listen on 127.0.0.1 ports from `ClusterSpec.port_base`.
Init systems are not used (there is none in containers); everything runs as root because
slurmd must start job steps as the submitting user.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Any

from hpcscale.devcluster import procs
from hpcscale.devcluster.client import TIMED_OUT, slurm
from hpcscale.devcluster.daemons import Progress, Starter
from hpcscale.devcluster.layout import Layout
from hpcscale.devcluster.preflight import check_ports, check_programs, check_state_dir, is_foreign
from hpcscale.devcluster.prepare import prepare_files
from hpcscale.devcluster.spec import ClusterSpec, default_state_dir
from hpcscale.devcluster.status import ClusterInfo, DaemonStatus, read_nodes
from hpcscale.formats.atomic import atomic_write
from hpcscale.model.errors import BackendError, HpcscaleError, UsageError
from hpcscale.state.lock import campaign_lock as dir_lock

STOP_TIMEOUT_S = 15.0
CANCEL_WAIT_S = 15.0


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
        check_state_dir(self.lay)
        self._merge_spec(settings)  # bad settings fail here, before anything is written
        if os.geteuid() != 0:
            raise HpcscaleError(
                "the local SLURM cluster must run as root (slurmd starts job steps as the "
                "submitting user)"
            )
        exe = check_programs()
        with dir_lock(self.lay.root, "cluster up"):
            spec = self._settle_spec(**settings)
            running = self.running()
            if all(name in running for name in spec.daemons):
                say(f"already up ({len(spec.daemons)} daemons running)")
                return self.status()
            check_ports(spec, running)
            prepare_files(self.lay, spec, exe, say)
            try:
                Starter(self.lay, spec, exe, running, say).start_all()
            except BackendError as exc:
                raise BackendError(
                    f"{exc}\nThe daemons that did start keep running (`hpcscale cluster status`); "
                    "`hpcscale cluster down` stops them, `up` again retries."
                ) from exc
        return self.status()

    def _merge_spec(self, overrides: dict[str, Any]) -> tuple[ClusterSpec | None, ClusterSpec]:
        """(saved, wanted): the saved settings with the given ones applied; validates."""
        saved = self.load_spec()
        given = {k: v for k, v in overrides.items() if v is not None}
        return saved, dataclasses.replace(saved, **given) if saved else ClusterSpec(**given)

    def _settle_spec(self, **overrides: Any) -> ClusterSpec:
        saved, spec = self._merge_spec(overrides)
        given = {k: v for k, v in overrides.items() if v is not None}
        if saved is not None and spec != saved and self.running():
            changed = ", ".join(
                f"{k}={getattr(saved, k)}->{v}" for k, v in given.items() if getattr(saved, k) != v
            )
            raise UsageError(
                f"the cluster in {self.lay.root} is running with different settings "
                f"({changed}); run `hpcscale cluster down` first"
            )
        if spec != saved:
            self.lay.root.mkdir(parents=True, exist_ok=True)
            atomic_write(self.lay.marker, spec.to_json(), mode=0o600)
        return spec

    # -- status

    def status(self) -> ClusterInfo:
        spec = self.load_spec()
        lay = self.lay
        records = self.records()
        names = spec.daemons if spec else sorted(records)
        daemons = []
        for name in names:
            rec = records.get(name)
            alive = rec is not None and procs.is_ours(rec)
            pid = rec.pid if rec else None
            daemons.append(DaemonStatus(name, pid, alive, str(lay.daemon_log(name))))
        ctld_alive = any(d.name == "slurmctld" and d.alive for d in daemons)
        return ClusterInfo(
            state_dir=str(lay.root),
            slurm_conf=str(lay.slurm_conf),
            cluster_name=spec.cluster_name if spec else "",
            partition=spec.partition if spec else "",
            up=bool(daemons) and all(d.alive for d in daemons),
            daemons=daemons,
            nodes=read_nodes(lay) if ctld_alive else [],
            spec=dataclasses.asdict(spec) if spec else {},
        )

    # -- down

    def down(self, purge: bool = False, progress: Progress | None = None) -> dict[str, str]:
        """Stop the recorded daemons (cancelling jobs first); `purge` also wipes state and DB."""
        say = progress or (lambda _msg: None)
        lay = self.lay
        if not lay.marker.exists():
            if is_foreign(lay):
                raise UsageError(f"{lay.root} is not a hpcscale cluster directory; not touching it")
            say(f"no cluster in {lay.root}")
            if purge:  # at most our own lock file is left
                shutil.rmtree(lay.root, ignore_errors=True)
            return {}
        outcome: dict[str, str] = {}
        with dir_lock(lay.root, "cluster down"):
            records = self.records()
            if not records:
                say(f"nothing was running in {lay.root}")
            ctld = records.get("slurmctld")
            if ctld is not None and procs.is_ours(ctld):
                self._cancel_jobs(say)
            spec = self.load_spec()
            order = spec.daemons if spec else []
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
        res = slurm(self.lay, "squeue", "-h", "-o", "%A", timeout=10)
        ids = sorted(set(res.stdout.split()))
        if ids:
            say(f"cancelling {len(ids)} job(s)")
            res = slurm(self.lay, "scancel", *ids, timeout=10)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while ids and res.returncode != TIMED_OUT:
            res = slurm(self.lay, "squeue", "-h", "-t", "R,CG,S,CF", "-o", "%A", timeout=10)
            if res.ok and not res.stdout.strip():
                return
            if time.monotonic() > deadline:
                say(f"some jobs did not end within {CANCEL_WAIT_S:.0f} s; stopping daemons anyway")
                return
            time.sleep(0.2)
        if res.returncode == TIMED_OUT:
            say(f"{res.argv[0]} timed out; stopping daemons anyway")
