"""Scaling arithmetic, in one place: how ranks, threads and batch sizes follow from an assignment.

Weak scaling keeps the per-replica batch and grows the global batch with the replicas; strong
scaling keeps the global batch and divides it. CPU layouts split a node's cores into
ranks x threads (1x28, 2x14, 4x7 on a 28-core node).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from hpcscale.model.run import Scaling


class ScalingError(ValueError):
    """An assignment that cannot be turned into a run; `axis` names the culprit (a matrix axis,
    `args.<name>`), or `key` the campaign key to blame when it is not an axis."""

    def __init__(self, axis: str, message: str, key: tuple[str | int, ...] | None = None) -> None:
        super().__init__(message)
        self.axis = axis
        self.key = key


_LAYOUT = re.compile(r"\s*(\d+)\s*[xX×*]\s*(\d+)\s*")


@dataclass(frozen=True)
class Layout:
    tasks_per_node: int
    threads_per_task: int


@lru_cache(maxsize=1024)  # a campaign names a handful of layouts, each parsed per cell
def parse_layout(text: str | int) -> Layout:
    """'2x14' (or '2×14') -> Layout(2, 14)."""
    m = _LAYOUT.fullmatch(str(text))
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ScalingError("layout", f"layout {text!r} is not RANKSxTHREADS, e.g. '2x14'")
    return Layout(int(m.group(1)), int(m.group(2)))


def fit_layout(
    cores_per_node: int,
    *,
    device: str,
    layout: str | None = None,
    tasks_per_node: int | None = None,
    threads_per_task: int | None = None,
    gpus_per_node: int = 0,
) -> Layout:
    """Ranks per node and threads per rank; they must fit the node's cores."""
    culprit = "layout"
    if layout is not None:
        if tasks_per_node is not None or threads_per_task is not None:
            raise ScalingError("layout", "give either layout or tasks_per_node/threads_per_task")
        lay = parse_layout(layout)
    else:
        for name, given in (
            ("tasks_per_node", tasks_per_node),
            ("threads_per_task", threads_per_task),
        ):
            if given is not None and (isinstance(given, bool) or given < 1):
                raise ScalingError(name, f"{name} must be a positive integer, got {given!r}")
        default_tasks = gpus_per_node if device == "gpu" and gpus_per_node else 1
        tasks = default_tasks if tasks_per_node is None else tasks_per_node
        threads = max(1, cores_per_node // tasks) if threads_per_task is None else threads_per_task
        lay = Layout(tasks, threads)
        culprit = "threads_per_task" if threads_per_task is not None else "tasks_per_node"
    used = lay.tasks_per_node * lay.threads_per_task
    if used > cores_per_node:
        raise ScalingError(
            culprit,
            f"{lay.tasks_per_node} ranks x {lay.threads_per_task} threads = {used} cores "
            f"does not fit a {cores_per_node}-core node",
        )
    return lay


def batches(
    scaling: Scaling,
    replicas: int,
    *,
    batch: int | None = None,
    batch_per_rank: int | None = None,
    global_batch: int | None = None,
) -> tuple[int, int]:
    """(per-replica batch, global batch).

    `batch` means per-replica for weak/none and global for strong; the explicit forms override.
    """
    given = [
        n
        for n, v in (
            ("batch", batch),
            ("batch_per_rank", batch_per_rank),
            ("global_batch", global_batch),
        )
        if v is not None
    ]
    if len(given) != 1:
        raise ScalingError(
            "batch",
            "give exactly one of batch, batch_per_rank, global_batch"
            + (f" (got {', '.join(given)})" if given else ""),
        )
    if replicas < 1:
        raise ScalingError("nodes", "a run needs at least one rank")
    if batch is not None:
        if scaling == "strong":
            global_batch = batch
        else:
            batch_per_rank = batch
    if batch_per_rank is not None:
        if batch_per_rank < 1:
            raise ScalingError(given[0], f"batch must be positive, got {batch_per_rank}")
        return batch_per_rank, batch_per_rank * replicas
    assert global_batch is not None
    if global_batch < 1:
        raise ScalingError(given[0], f"batch must be positive, got {global_batch}")
    if global_batch % replicas:
        raise ScalingError(
            given[0],
            f"strong scaling: global batch {global_batch} does not divide evenly over "
            f"{replicas} replicas",
        )
    return global_batch // replicas, global_batch
