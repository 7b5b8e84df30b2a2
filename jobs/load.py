"""The machine's load around a run: what else was using the CPUs when it was measured.

A run that shares its cores with other work measures the other work too (issue 13: two array
tasks of the local cluster ran at once on 2 cores and a 1-node epoch took 3x the local one). So
every rank calls `sample` at the same point (before the timed epochs, and after them): after a
barrier, all ranks sleep for WINDOW_S while rank 0 reads /proc/stat, so the CPU time spent in
that window is other processes' (`others_cpus`, in CPUs). The load averages (1/5/15 min) are
recorded as well, but they lag by a minute and still hold the previous run's load, so the
report's busy rule uses `others_cpus`. Under SLURM the other running jobs on this node are
counted with squeue (short timeout; None when it does not answer).

jobs/ imports from hpcscale only hpcscale.formats, so this module stands alone.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

WINDOW_S = 0.5
SQUEUE_TIMEOUT_S = 5.0
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def machine_id() -> str:
    """The physical machine: the kernel's boot id (one per booted kernel, so the local
    cluster's virtual nodes, and containers with their own hostnames, share it), else the
    hostname."""
    try:
        return f"boot:{BOOT_ID.read_text().strip()}"
    except OSError:
        return f"host:{socket.gethostname()}"


def _cpu_jiffies() -> Optional[tuple[int, int]]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat; None where absent."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user time
    return total - idle, total


def busy_cpus(
    before: Optional[tuple[int, int]], after: Optional[tuple[int, int]], cpus: int, ours: float
) -> Optional[float]:
    """CPUs kept busy by processes other than this run's ranks between two /proc/stat reads;
    `ours`: the CPUs the run's own ranks on this machine used meanwhile (their Horovod and
    tf.data threads keep running while the ranks sleep)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    share = (after[0] - before[0]) / (after[1] - before[1])
    return max(share * cpus - ours, 0.0)


def other_slurm_jobs() -> Optional[int]:
    """Running SLURM jobs on this node other than this one; None outside SLURM or when
    squeue does not answer in time."""
    job, node = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURMD_NODENAME")
    if not job or not node:
        return None
    argv = ["squeue", "-h", "-w", node, "-t", "R", "-o", "%A"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    return len({j.strip() for j in res.stdout.split() if j.strip() and j.strip() != job})


def sample(
    gather: Callable[[Any], list[Any]], rank: int, window_s: float = WINDOW_S
) -> dict[str, Any]:
    """One load sample (a metrics.json LoadSample) on rank 0, {} elsewhere. Every rank calls
    it at the same point with the run's allgather: the first gather lines the ranks up, then
    all sleep for the window and report their own process CPU, so what is left of the
    machine's busy time is other processes' (every rank of this run on this machine, not only
    rank 0, is subtracted)."""
    gather(None)
    cpus = os.cpu_count() or 1
    before, own0, t0 = _cpu_jiffies(), time.process_time(), time.monotonic()
    time.sleep(window_s)
    after, own1, t1 = _cpu_jiffies(), time.process_time(), time.monotonic()
    own = (own1 - own0) / max(t1 - t0, 1e-9)
    me = machine_id()
    ranks = gather((me, own))
    if rank != 0:
        return {}
    ours = sum(cpu for machine, cpu in ranks if machine == me)
    load = os.getloadavg()
    return {
        "unix_s": time.time(),
        "load_1m": load[0],
        "load_5m": load[1],
        "load_15m": load[2],
        "cpus": cpus,
        "others_cpus": busy_cpus(before, after, cpus, ours),
        "other_jobs": other_slurm_jobs(),
    }
