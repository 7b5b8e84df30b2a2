"""The job's resolved configuration and the small pure arithmetic the harness relies on.

No TensorFlow import here, so train.py can validate arguments (and exit 2) in milliseconds.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

# The GAN geometry rules are declared with the arguments (jobs/manifest.py, read by hpcscale too).
from jobs.manifest import gan_image_size_problem, gan_upsamplings  # noqa: F401


class JobUsageError(Exception):
    """Bad arguments or inputs found after parsing (e.g. NCCL asked for on a CPU-only machine):
    train.py prints the message as one line and exits with code 2."""


@dataclass(frozen=True)
class JobConfig:
    model: str
    workload: str
    run_dir: Path
    batch_per_rank: int
    epochs: int
    steps_per_epoch: int | None
    dataset_size: int | None
    image_size: int
    num_classes: int
    strategy: str
    cross_device_ops: str | None
    devices: int
    fp16_allreduce: bool
    mixed_precision: bool
    timeline: bool
    mark_cycles: bool
    timeline_dir: Path | None
    data_dir: Path | None
    seed: int
    device: str
    threads: int | None
    inter_op_threads: int | None
    lr: float | None
    warmup_epochs: float
    burn_in_steps: int
    width: int
    latent_dim: int
    n_critic: int
    gp_weight: float
    check_sync: bool
    debug_desync: bool
    argv: tuple[str, ...] = ()


def scaled_lr(step: float, base_lr: float, replicas: int, warmup_steps: float) -> float:
    """Learning rate scaled linearly by the number of replicas (Goyal et al. 2017): start at
    `base_lr` and reach `base_lr * replicas` after `warmup_steps` optimizer updates (at once when
    warmup_steps is 0)."""
    target = base_lr * replicas
    if warmup_steps <= 0 or step >= warmup_steps:
        return target
    return base_lr + (target - base_lr) * (step / warmup_steps)


def steps_per_epoch(dataset_size: int, global_batch: int, requested: int | None) -> int:
    """Every rank runs the same number of steps (uneven shards would leave one rank waiting in
    an allreduce the others never submit): the requested count, else whole global batches."""
    if requested is not None:
        return requested
    return max(1, dataset_size // global_batch)


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an ascending list; q in [0, 100]."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def gpu_only_message(cross_device_ops: str) -> str:
    return (
        f"--cross-device-ops {cross_device_ops} needs GPUs (NCCL / GPU peer copies) and this run "
        "is on CPU; use --cross-device-ops reduce_to_one, or --device gpu on a GPU node"
    )


def process_world_size(environ: dict[str, str] | None = None) -> int:
    """Ranks the launcher started, read from its environment before any MPI initialisation."""
    env = os.environ if environ is None else environ
    for var in ("OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"):
        if env.get(var, "").isdigit():
            return int(env[var])
    return 1
