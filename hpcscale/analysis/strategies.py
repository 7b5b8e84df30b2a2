"""How a run's strategy is named in tables, labels and legends (Ahmad & Cai's names)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

# How a command run's strategy is named: its program may use Horovod, torch, or no framework.
COMMAND_STRATEGY = "Your program"
_CROSS_DEVICE = {
    "nccl": "NcclAllReduce",
    "reduce_to_one": "ReductionToOneDevice",
    "hierarchical_copy": "HierarchicalCopy",
}


def strategy_name(
    strategy: str, cross_device_ops: object, mpi: str, command: object = None, launcher: object = ""
) -> str:
    """Ahmad & Cai name MirroredStrategy runs by their cross-device op; Horovod runs by MPI;
    PyTorch DDP runs by their launcher. A command (the user's own program) is Horovod only when
    horovodrun launched it, PyTorch DDP when its campaign says `workload.framework: torch`."""
    if strategy == "torch_ddp":  # gloo or NCCL, whichever MPI ran around it
        own = isinstance(command, str) and command
        return (
            f"{COMMAND_STRATEGY} (PyTorch DDP)" if own else f"PyTorch DDP ({launcher or 'mpirun'})"
        )
    if isinstance(command, str) and command and launcher != "horovodrun":
        return f"{COMMAND_STRATEGY} ({mpi})"
    if strategy == "mirrored":
        return _CROSS_DEVICE.get(str(cross_device_ops), "MirroredStrategy")
    return f"Horovod ({mpi})"


def strategy_of(row: Mapping[str, object]) -> str:
    """`strategy_name` of one run or cell (a row or a dict with the run fields)."""
    return strategy_name(
        str(row["strategy"]),
        row["cross_device_ops"],
        str(row["mpi"]),
        row.get("command"),
        row.get("launcher", ""),
    )


def strategy_names(rows: pd.DataFrame) -> list[str]:
    """`strategy_name` of each row of a frame of runs or cells."""
    none = [None] * len(rows)
    cols = [rows.get(c, none) for c in ("command", "launcher")]
    return [
        strategy_name(s, c, m, cmd, la)
        for s, c, m, cmd, la in zip(
            rows["strategy"], rows["cross_device_ops"], rows["mpi"], *cols, strict=True
        )
    ]
