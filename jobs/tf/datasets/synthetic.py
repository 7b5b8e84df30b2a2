"""Synthetic data, the default: free per step.

A small pool of batches is drawn once from a generator seeded by (seed, rank), so each rank sees
its own deterministic shard, and the pool is cycled: no decoding, no I/O.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from jobs.tf.config import JobConfig, steps_per_epoch
from jobs.tf.datasets.pipeline import options
from jobs.tf.datasets.spec import DataSpec

DEFAULT_SYNTHETIC_SIZE = 8192
DEFAULT_CLASSES = 10
POOL_BATCHES = 4


def dataset_size_for(cfg: JobConfig, global_batch: int) -> int:
    """Epoch size: --dataset-size, else what --steps-per-epoch covers, else a default."""
    if cfg.dataset_size is not None:
        return cfg.dataset_size
    if cfg.steps_per_epoch is not None:
        return cfg.steps_per_epoch * global_batch
    return DEFAULT_SYNTHETIC_SIZE


def make_synthetic(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    size = dataset_size_for(cfg, global_batch)
    steps = steps_per_epoch(size, global_batch, cfg.steps_per_epoch)
    classes = cfg.num_classes or DEFAULT_CLASSES
    rng = np.random.default_rng([cfg.seed, rank])
    shape = (min(steps, POOL_BATCHES), process_batch, cfg.image_size, cfg.image_size, 3)
    images = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    if cfg.workload == "gan":
        ds = tf.data.Dataset.from_tensor_slices(images)
    else:
        labels = rng.integers(0, classes, size=shape[:2], dtype=np.int32)
        ds = tf.data.Dataset.from_tensor_slices((images, labels))
    ds = ds.repeat().prefetch(tf.data.AUTOTUNE).with_options(options(cfg))
    labelled = cfg.workload != "gan"
    return DataSpec(ds, size, steps, "synthetic", num_classes=classes if labelled else None)
