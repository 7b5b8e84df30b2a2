"""Which GPU a rank drives: one GPU per local rank, or a clear error (exit 2) naming what the
process sees. Pure (device names in, an index out), so it is tested without TensorFlow or a GPU.

hpcscale's scripts request GPUs per node, so every rank on a node sees all of that node's GPUs and
local rank i takes the i-th. With no GPU visible (a CPU-only TensorFlow on a GPU node, a wrong
CUDA_VISIBLE_DEVICES), or fewer than the ranks on the node (two ranks would silently share one and
every figure of the run would be wrong), the job stops before it measures anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from jobs.tf.config import JobUsageError


def _seen(visible: Sequence[str], cuda_visible_devices: Optional[str]) -> str:
    names = ", ".join(n.rpartition("device:")[2] or n for n in visible) or "none"
    env = "unset" if cuda_visible_devices is None else repr(cuda_visible_devices)
    return f"visible GPUs: {names}; CUDA_VISIBLE_DEVICES={env}"


def gpu_for_local_rank(
    visible: Sequence[str],
    local_rank: int,
    ranks_per_node: int,
    cuda_visible_devices: Optional[str],
) -> int:
    """Index into `visible` (TensorFlow's GPUs, in order) of the GPU of `local_rank` among
    `ranks_per_node` ranks on this node: `local_rank` itself when every rank has its own."""
    if not 0 <= local_rank < ranks_per_node:
        raise ValueError(f"local rank {local_rank} of {ranks_per_node}")
    if not visible:
        raise JobUsageError(
            "--device gpu, but TensorFlow sees no GPU on this node "
            f"({_seen(visible, cuda_visible_devices)}; {ranks_per_node} rank(s) per node): "
            "a CPU-only TensorFlow, no GPU requested, "
            "or a CUDA_VISIBLE_DEVICES that hides them"
        )
    if len(visible) < ranks_per_node:
        raise JobUsageError(
            f"--device gpu with {ranks_per_node} ranks per node needs one GPU per rank, but "
            f"TensorFlow sees {len(visible)} ({_seen(visible, cuda_visible_devices)}): ranks "
            "would share a GPU; request as many GPUs per node as ranks, or fewer ranks per node"
        )
    return local_rank


def gpus_for_replicas(
    visible: Sequence[str], devices: int, cuda_visible_devices: Optional[str]
) -> list[str]:
    """The first `devices` GPUs for one process's replicas (--strategy mirrored --devices N)."""
    if len(visible) < devices:
        none = "no GPU" if not visible else f"only {len(visible)} GPU(s)"
        raise JobUsageError(
            f"--device gpu --devices {devices}, but TensorFlow sees {none} "
            f"({_seen(visible, cuda_visible_devices)}; 1 process per node)"
        )
    return list(visible[:devices])
