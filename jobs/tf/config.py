"""The job's resolved configuration and the small pure arithmetic the harness relies on.

No TensorFlow import here, so train.py can validate arguments (and exit 2) in milliseconds.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# The GAN geometry rules are declared with the arguments (jobs/tf/manifest.py, read by hpcscale
# too).
from jobs.tf.manifest import gan_image_size_problem, gan_upsamplings  # noqa: F401


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
    steps_per_epoch: Optional[int]
    dataset_size: Optional[int]
    image_size: int
    num_classes: Optional[int]  # None: the data's (harness.run resolves it before building)
    strategy: str
    cross_device_ops: Optional[str]
    devices: int
    fp16_allreduce: bool
    mixed_precision: bool
    timeline: bool
    mark_cycles: bool
    timeline_dir: Optional[Path]
    data_dir: Optional[Path]
    dataset: Optional[str]  # None: synthetic, or folder with data_dir (jobs/tf/datasets)
    val_split: float
    val_dir: Optional[Path]
    center_crop: Optional[int]
    seed: int
    device: str
    threads: Optional[int]
    inter_op_threads: Optional[int]
    lr: Optional[float]
    warmup_epochs: float
    lr_scaling: str  # linear | sqrt | none, relative to lr_ref_batch
    lr_ref_batch: Optional[int]  # None: batch_per_rank
    burn_in_steps: int
    width: int
    latent_dim: int
    n_critic: int
    gp_weight: float
    check_sync: bool
    debug_desync: bool
    # StackGAN (jobs/tf/models/stackgan.py) and the cub dataset; defaults as in jobs/tf/manifest.py
    stage: int = 1
    stage1_weights: Optional[Path] = None
    stage1_steps: Optional[int] = None
    stage2_factor: int = 4
    embedding_dim: int = 1024
    condition_dim: int = 128
    kl_weight: float = 2.0
    images_per_class: Optional[int] = None
    argv: tuple[str, ...] = ()
    # model: classifier (jobs/tf/models/classifier.py, jobs/tf/keras_fit.py); see manifest.py
    backbone: str = "mobilenet_v2"
    weights: str = "none"  # none | imagenet | a weights file
    optimizer: str = "adam"
    fine_tune: bool = False
    head_epochs: Optional[int] = None  # None: half of epochs
    unfreeze_layers: Optional[int] = None  # None: the whole backbone
    fine_tune_lr_factor: float = 0.1
    augment: str = "none"
    aug_zoom: Optional[float] = None  # None: the preset's
    aug_shift: Optional[float] = None
    aug_rotation: Optional[float] = None
    aug_flip: bool = False


def lr_scale(rule: str, global_batch: int, ref_batch: int) -> float:
    """The factor --lr-scaling applies to --lr: global_batch / ref_batch (linear, Goyal et al.
    2017), its square root (sqrt) or 1 (none). Strong scaling keeps the global batch, so it
    keeps the rate when ref_batch is that batch; weak scaling grows it."""
    ratio = global_batch / ref_batch
    factors = {"linear": ratio, "sqrt": math.sqrt(ratio), "none": 1.0}
    if rule not in factors:
        raise JobUsageError(f"--lr-scaling {rule}: expected one of {', '.join(factors)}")
    return factors[rule]


def scaled_lr(
    step: float,
    base_lr: float,
    warmup_steps: float,
    global_batch: int,
    ref_batch: int,
    rule: str = "linear",
) -> float:
    """The learning rate after `step` optimizer updates: `base_lr` ramped linearly to
    eta = base_lr * lr_scale(rule, global_batch, ref_batch) over `warmup_steps` (eta at once
    when warmup_steps is 0)."""
    target = base_lr * lr_scale(rule, global_batch, ref_batch)
    if warmup_steps <= 0 or step >= warmup_steps:
        return target
    return base_lr + (target - base_lr) * (step / warmup_steps)


def ref_batch_of(cfg: JobConfig) -> int:
    """--lr-ref-batch, by default one replica's batch (seed 004's "lr x size")."""
    return cfg.lr_ref_batch if cfg.lr_ref_batch is not None else cfg.batch_per_rank


def steps_per_epoch(dataset_size: int, global_batch: int, requested: Optional[int]) -> int:
    """Every rank runs the same number of steps (uneven shards would leave one rank waiting in
    an allreduce the others never submit): the requested count, else whole global batches."""
    if requested is not None:
        return requested
    return max(1, dataset_size // global_batch)


def gpu_only_message(cross_device_ops: str) -> str:
    return (
        f"--cross-device-ops {cross_device_ops} needs GPUs (NCCL / GPU peer copies) and this run "
        "is on CPU; use --cross-device-ops reduce_to_one, or --device gpu on a GPU node"
    )


def process_world_size(environ: Optional[dict[str, str]] = None) -> int:
    """Ranks the launcher started, read from its environment before any MPI initialisation."""
    env = os.environ if environ is None else environ
    for var in ("OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"):
        if env.get(var, "").isdigit():
            return int(env[var])
    return 1
