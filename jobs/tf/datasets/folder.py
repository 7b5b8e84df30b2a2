"""`folder`: one sub-folder of images per class (fruits, Caltech-256), classes in sorted order.

The held-out split is either a separate --val-dir with the same classes, or --val-split of every
class (stratified: each class gives held_out(frac, n) images, chosen with --seed, so every rank
computes the same split). --dataset-size then takes a seeded subset of the training part.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Union

import numpy as np
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

Pairs = list[tuple[str, int]]


def list_classes(root: Path, flag: str = "--data-dir") -> tuple[list[str], list[list[str]]]:
    """(class names, each class' image paths), sorted; an error when there are no images."""
    if not root.is_dir():
        raise JobUsageError(f"{flag} {root}: not a directory")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files = [[str(f) for f in image_files(root / c)] for c in classes]
    if not any(files):
        raise JobUsageError(
            f"{flag} {root}: no images found (expected one sub-folder per class holding "
            f"{', '.join(sorted(IMAGE_SUFFIXES))} files)"
        )
    return classes, files


def stratified(files: list[list[str]], frac: float, seed: int) -> tuple[Pairs, Pairs]:
    """(train, validation) (path, label) pairs: each class split on its own, seeded."""
    rng = random.Random(seed)
    train: Pairs = []
    val: Pairs = []
    for label, paths in enumerate(files):
        t, v = split(paths, frac, rng)
        train += [(p, label) for p in t]
        val += [(p, label) for p in v]
    return train, val


def _val_dir(cfg: JobConfig, classes: list[str]) -> Pairs:
    assert cfg.val_dir is not None
    names, files = list_classes(cfg.val_dir, "--val-dir")
    if names != classes:
        missing = sorted(set(classes) - set(names))
        extra = sorted(set(names) - set(classes))
        raise JobUsageError(
            f"--val-dir {cfg.val_dir} has other classes than --data-dir {cfg.data_dir}: "
            f"missing {missing or 'none'}, extra {extra or 'none'}"
        )
    return [(p, label) for label, paths in enumerate(files) for p in paths]


def _check_classes(cfg: JobConfig, classes: list[str]) -> None:
    if cfg.workload == "gan" or cfg.num_classes is None or cfg.num_classes == len(classes):
        return
    raise JobUsageError(
        f"--num-classes {cfg.num_classes} but --data-dir {cfg.data_dir} has {len(classes)} "
        f"classes (sub-folders); leave --num-classes out to use the data's"
    )


def make_folder(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    assert cfg.data_dir is not None
    classes, files = list_classes(cfg.data_dir)
    _check_classes(cfg, classes)
    train, val = stratified(files, cfg.val_split, cfg.seed)
    if cfg.val_dir is not None:
        val = _val_dir(cfg, classes)
    if cfg.dataset_size is not None and cfg.dataset_size < len(train):
        random.Random(cfg.seed).shuffle(train)  # the same subset on every rank
        train = sorted(train[: cfg.dataset_size])
    check_size(len(train), global_batch, f"--data-dir {cfg.data_dir}")
    px, gan = cfg.image_size, cfg.workload == "gan"

    def load(path: tf.Tensor, label: tf.Tensor) -> Union[tuple[tf.Tensor, tf.Tensor], tf.Tensor]:
        img = decode(tf.io.read_file(path), px)
        return img if gan else (img, label)

    mine, my_val = shard(train, rank, shards), shard(val, rank, shards)
    ds = train_batches(_slices(mine), len(mine), load, cfg, rank, process_batch)
    val_ds = val_batches(_slices(my_val), load, cfg, process_batch) if val else None
    return DataSpec(
        ds,
        len(train),
        steps_per_epoch(len(train), global_batch, cfg.steps_per_epoch),
        str(cfg.data_dir),  # the default format keeps what metrics.json `data` always held
        val_dataset=val_ds,
        val_images=len(my_val),
        val_size=len(val),
        classes=classes,
        num_classes=len(classes),
    )


def _slices(pairs: Pairs) -> tf.data.Dataset:
    paths = tf.constant([p for p, _ in pairs], tf.string)
    labels = np.array([label for _, label in pairs], np.int32)
    return tf.data.Dataset.from_tensor_slices((paths, labels))
