"""Rank, world and rendezvous of a DDP job, from whatever launcher started it.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Under
mpirun or srun without torchrun the rank and world come from the launcher's own variables (Open
MPI, MVAPICH2, MPICH/Hydra's PMI, SLURM), and MASTER_ADDR/MASTER_PORT must be given: a run of
several ranks without them is a usage error, never a silent fallback to localhost (a rank on
another node would wait for a store that is not there, a hang instead of an error).

torch's TCPStore listens on every interface by default. When MASTER_ADDR is loopback, rank 0
binds the store's socket to 127.0.0.1 itself and hands it over (`master_listen_fd`), and gloo's
own sockets are kept on loopback (GLOO_SOCKET_IFNAME=lo unless set): nothing listens beyond it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist

# launcher, rank, world size, local rank, local world size (None: derived)
LAUNCHER_VARS: tuple[tuple[str, str, str, str, Optional[str]], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("mvapich2", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
     "MV2_COMM_WORLD_LOCAL_SIZE"),
    ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
)  # fmt: skip
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


class DistUsageError(Exception):
    """The environment cannot start this rank (train.py: one line, exit 2)."""


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int  # 0: pick a free one (a single rank only)
    launcher: str  # which variables gave the rank: torchrun, openmpi, ..., or single


def _int(env: Mapping[str, str], name: str) -> int:
    text = env.get(name, "")
    if not text.strip().isdigit():
        raise DistUsageError(f"{name}={text!r} is not a non-negative integer")
    return int(text)


def _slurm_local_size(env: Mapping[str, str]) -> int:
    """Tasks on this node from SLURM_TASKS_PER_NODE ("2(x3),1": the first node's)."""
    first = env.get("SLURM_STEP_TASKS_PER_NODE", env.get("SLURM_TASKS_PER_NODE", "1"))
    head = first.split(",")[0].split("(")[0]
    return int(head) if head.isdigit() else 1


def from_environ(environ: Optional[Mapping[str, str]] = None) -> DistEnv:
    """This rank's place in the job, read from the first launcher whose variables are set."""
    env = os.environ if environ is None else environ
    for launcher, rank_var, size_var, local_var, local_size_var in LAUNCHER_VARS:
        if rank_var not in env or size_var not in env:
            continue
        rank, size = _int(env, rank_var), _int(env, size_var)
        local = _int(env, local_var) if local_var in env else 0
        if local_size_var is not None and local_size_var in env:
            local_size = _int(env, local_size_var)
        else:
            local_size = _slurm_local_size(env) if launcher == "slurm" else 1
        if not 0 <= rank < size:
            raise DistUsageError(f"{rank_var}={rank} is outside {size_var}={size}")
        break
    else:
        launcher, rank, size, local, local_size = "single", 0, 1, 0, 1
    addr = env.get("MASTER_ADDR", "")
    port_text = env.get("MASTER_PORT", "")
    if size > 1 and not addr:
        raise DistUsageError(
            f"MASTER_ADDR is not set: {size} ranks ({launcher}) need the first host's address "
            "(no fallback to localhost on a run of several ranks)"
        )
    if size > 1 and not port_text:
        raise DistUsageError(f"MASTER_PORT is not set: {size} ranks ({launcher}) need one")
    port = _int(env, "MASTER_PORT") if port_text else 0
    return DistEnv(rank, size, local, local_size, addr or "127.0.0.1", port, launcher)


def is_loopback(addr: str) -> bool:
    if addr.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def make_store(denv: DistEnv, timeout: datetime.timedelta) -> dist.TCPStore:
    """The rendezvous store; on loopback, rank 0's server socket is bound to 127.0.0.1."""
    if denv.rank != 0:
        return dist.TCPStore(denv.master_addr, denv.master_port, denv.world_size, False, timeout)
    if not is_loopback(denv.master_addr):  # other nodes must reach it
        return dist.TCPStore(denv.master_addr, denv.master_port, denv.world_size, True, timeout)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", denv.master_port))
        sock.listen(max(64, denv.world_size))
    except OSError as exc:
        sock.close()
        raise DistUsageError(f"MASTER_PORT {denv.master_port} on 127.0.0.1: {exc}") from None
    port = sock.getsockname()[1]
    return dist.TCPStore(
        "127.0.0.1", port, denv.world_size, True, timeout, master_listen_fd=sock.detach()
    )


def default_backend(device: str) -> str:
    return "nccl" if device == "gpu" and torch.cuda.is_available() else "gloo"


def init(denv: DistEnv, backend: str, timeout_s: float = 300.0) -> Optional[dist.TCPStore]:
    """Join the process group; the store made here (None under torchrun, whose agent owns
    one). Kept by the caller for the life of the group."""
    timeout = datetime.timedelta(seconds=timeout_s)
    if is_loopback(denv.master_addr):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":  # torchrun's own store
        dist.init_process_group(
            backend, init_method="env://", rank=denv.rank, world_size=denv.world_size,
            timeout=timeout,
        )  # fmt: skip
        return None
    store = make_store(denv, timeout)
    dist.init_process_group(
        backend, store=store, rank=denv.rank, world_size=denv.world_size, timeout=timeout
    )
    return store


def allreduce_check(device: torch.device) -> dict[str, float]:
    """Sum of rank + 1 over the ranks, against its known value world (world + 1) / 2."""
    world = dist.get_world_size()
    t = torch.tensor([float(dist.get_rank() + 1)], device=device)
    dist.all_reduce(t)
    return {"got": float(t.item()), "expected": world * (world + 1) / 2.0}
