"""`flat`: unlabelled images in one directory, for GANs (CelebA's img_align_celeba/).

Each image is cut to a centred square (--center-crop px, default its shorter side; DCGAN's
CelebA training crops 108 px of the 178 x 218 faces) and then resized to --image-size. A
--val-split holds out a seeded choice of files; --val-dir is another flat directory.
"""

from __future__ import annotations

import random
from pathlib import Path

import tensorflow as tf

from jobs.tf.config import JobConfig, JobUsageError, steps_per_epoch
from jobs.tf.datasets.pipeline import (
    IMAGE_SUFFIXES,
    check_size,
    decode,
    image_files,
    shard,
    split,
    train_batches,
    val_batches,
)
from jobs.tf.datasets.spec import DataSpec


def list_flat(root: Path, flag: str = "--data-dir") -> list[str]:
    if not root.is_dir():
        raise JobUsageError(f"{flag} {root}: not a directory")
    files = [str(f) for f in image_files(root)]
    if not files:
        hint = " (class sub-folders? use --dataset folder)" if any(root.iterdir()) else ""
        raise JobUsageError(
            f"{flag} {root}: no {', '.join(sorted(IMAGE_SUFFIXES))} files directly in it{hint}"
        )
    return files


def make_flat(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    assert cfg.data_dir is not None
    train, val = split(list_flat(cfg.data_dir), cfg.val_split, random.Random(cfg.seed))
    if cfg.val_dir is not None:
        val = list_flat(cfg.val_dir, "--val-dir")
    if cfg.dataset_size is not None and cfg.dataset_size < len(train):
        train = sorted(random.Random(cfg.seed).sample(train, cfg.dataset_size))
    check_size(len(train), global_batch, f"--data-dir {cfg.data_dir}")
    px = cfg.image_size
    crop = cfg.center_crop if cfg.center_crop is not None else True

    def load(path: tf.Tensor) -> tf.Tensor:
        return decode(tf.io.read_file(path), px, crop)

    mine, my_val = shard(train, rank, shards), shard(val, rank, shards)
    ds = train_batches(_paths(mine), len(mine), load, cfg, rank, process_batch)
    val_ds = val_batches(_paths(my_val), load, cfg, process_batch) if val else None
    return DataSpec(
        ds,
        len(train),
        steps_per_epoch(len(train), global_batch, cfg.steps_per_epoch),
        f"flat:{cfg.data_dir}",
        val_dataset=val_ds,
        val_images=len(my_val),
        val_size=len(val),
    )


def _paths(paths: list[str]) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(tf.constant(paths, tf.string))
