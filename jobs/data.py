"""Input pipelines: synthetic by default, or a class-per-folder image directory.

Synthetic data is a small pool of batches drawn once from a generator seeded by (seed, rank), so
each rank sees its own deterministic shard and the pipeline costs nothing per step; the pool is
cycled. A directory is listed in sorted order on every rank, optionally cut to --dataset-size with
a seeded shuffle, and sharded `files[rank::ranks]`; images are decoded with tf.data, resized to
--image-size and scaled to [-1, 1]. Either way every rank runs the same number of steps per epoch
(the dataset repeats), which keeps the collectives of all ranks in step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from jobs.config import JobConfig, JobUsageError, steps_per_epoch

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif"}
DEFAULT_SYNTHETIC_SIZE = 8192
POOL_BATCHES = 4


@dataclass(frozen=True)
class DataSpec:
    dataset: tf.data.Dataset  # yields this process' batches (a global batch under mirrored)
    dataset_size: int  # images in one epoch, all ranks together
    steps_per_epoch: int
    description: str  # "synthetic" or the directory


def dataset_size_for(cfg: JobConfig, global_batch: int) -> int:
    """Synthetic epoch size: --dataset-size, else what --steps-per-epoch covers, else a default."""
    if cfg.dataset_size is not None:
        return cfg.dataset_size
    if cfg.steps_per_epoch is not None:
        return cfg.steps_per_epoch * global_batch
    return DEFAULT_SYNTHETIC_SIZE


def make_data(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    """`shards` = horovod ranks (1 under mirrored); `process_batch` = what one next() yields."""
    if cfg.data_dir is not None:
        return _directory(cfg, rank, shards, global_batch, process_batch)
    size = dataset_size_for(cfg, global_batch)
    steps = steps_per_epoch(size, global_batch, cfg.steps_per_epoch)
    ds = _synthetic(cfg, rank, process_batch, min(steps, POOL_BATCHES))
    return DataSpec(_finish(ds, cfg), size, steps, "synthetic")


def _synthetic(cfg: JobConfig, rank: int, batch: int, pool: int) -> tf.data.Dataset:
    rng = np.random.default_rng([cfg.seed, rank])
    shape = (pool, batch, cfg.image_size, cfg.image_size, 3)
    images = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    if cfg.workload == "gan":
        return tf.data.Dataset.from_tensor_slices(images).repeat()
    labels = rng.integers(0, cfg.num_classes, size=(pool, batch), dtype=np.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat()


def list_image_dir(data_dir: Path) -> tuple[list[str], list[int], list[str]]:
    """(paths, labels, class names) of a class-per-folder directory, in sorted order."""
    if not data_dir.is_dir():
        raise JobUsageError(f"--data-dir {data_dir}: not a directory")
    classes = sorted(p.name for p in data_dir.iterdir() if p.is_dir())
    paths: list[str] = []
    labels: list[int] = []
    for idx, name in enumerate(classes):
        for f in sorted((data_dir / name).iterdir()):
            if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file():
                paths.append(str(f))
                labels.append(idx)
    if not paths:
        raise JobUsageError(
            f"--data-dir {data_dir}: no images found (expected one sub-folder per class holding "
            f"{', '.join(sorted(IMAGE_SUFFIXES))} files)"
        )
    return paths, labels, classes


def _directory(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    assert cfg.data_dir is not None
    paths, labels, classes = list_image_dir(cfg.data_dir)
    if cfg.workload == "cnn" and len(classes) > cfg.num_classes:
        raise JobUsageError(
            f"--data-dir {cfg.data_dir} has {len(classes)} classes but --num-classes is "
            f"{cfg.num_classes}"
        )
    pairs = list(zip(paths, labels, strict=True))
    if cfg.dataset_size is not None and cfg.dataset_size < len(pairs):
        random.Random(cfg.seed).shuffle(pairs)  # same subset on every rank
        pairs = pairs[: cfg.dataset_size]
    size = len(pairs)
    if size < global_batch:
        raise JobUsageError(
            f"--data-dir {cfg.data_dir}: {size} images, fewer than one global batch "
            f"({global_batch})"
        )
    mine = pairs[rank::shards]
    steps = steps_per_epoch(size, global_batch, cfg.steps_per_epoch)
    px = cfg.image_size
    gan = cfg.workload == "gan"

    def load(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor] | tf.Tensor:
        img = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        img = tf.image.resize(img, (px, px))
        img = tf.cast(img, tf.float32) / 127.5 - 1.0
        return img if gan else (img, label)

    ds = tf.data.Dataset.from_tensor_slices(
        ([p for p, _ in mine], np.array([lab for _, lab in mine], np.int32))
    )
    ds = ds.shuffle(len(mine), seed=cfg.seed + rank, reshuffle_each_iteration=True).repeat()
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(process_batch, drop_remainder=True)
    return DataSpec(_finish(ds, cfg), size, steps, str(cfg.data_dir))


def _finish(ds: tf.data.Dataset, cfg: JobConfig) -> tf.data.Dataset:
    opts = tf.data.Options()
    if cfg.threads:
        opts.threading.private_threadpool_size = max(1, cfg.threads)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(opts)
