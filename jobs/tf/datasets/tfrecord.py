"""`tfrecord`: ImageNet-style shards, the format HPC sites keep ImageNet in.

Files `train-*-of-*` in --data-dir (the held-out split: `validation-*-of-*` there when present
and --val-split is 0, or those of --val-dir), uncompressed, each record a tf.train.Example with
`image/encoded` (JPEG/PNG bytes) and `image/class/label` (int64, used as stored: labelled models
need --num-classes greater than every label; a label outside 0..N-1 stops the run with an error
naming it). Records are counted from the record headers (no decoding) so every rank knows the
epoch length. A rank reads whole files when there are at least as many files as ranks, else
every ranks-th record; files are read with a parallel interleave. --val-split holds out the
first held_out(frac, n) records of every file.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import tensorflow as tf

from jobs.tf.config import JobConfig, JobUsageError, steps_per_epoch
from jobs.tf.datasets.pipeline import check_size, decode, held_out, train_batches, val_batches
from jobs.tf.datasets.spec import DataSpec

FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
}
BAD_LABEL = "image/class/label outside 0..num_classes-1 (check --num-classes)"


def count_records(path: Path) -> int:
    """Records in an uncompressed TFRecord file, read from the length headers alone."""
    n, size = 0, path.stat().st_size
    with path.open("rb") as f:
        while head := f.read(8):
            if len(head) < 8:
                break
            f.seek(4 + struct.unpack("<Q", head)[0] + 4, os.SEEK_CUR)
            n += 1
        if f.tell() != size:
            raise JobUsageError(f"{path}: not an uncompressed TFRecord file (or truncated)")
    return n


def shard_files(directory: Path, prefix: str) -> list[Path]:
    return sorted(directory.glob(f"{prefix}-*-of-*"))


class Part:
    """Some records of some files: file i from its record skip[i] on, take[i] of them."""

    def __init__(self, files: list[Path], skip: list[int], take: list[int]) -> None:
        self.files, self.skip, self.take = files, skip, take

    @property
    def size(self) -> int:
        return sum(self.take)

    def shard(self, rank: int, shards: int) -> tuple[tf.data.Dataset, int]:
        """This rank's records (by file when there are enough files, else by record) and how
        many; deterministic order (training shuffles after)."""
        by_file = len(self.files) >= shards
        idx = (
            list(range(rank, len(self.files), shards)) if by_file else list(range(len(self.files)))
        )
        ds = tf.data.Dataset.from_tensor_slices(
            (
                tf.constant([str(self.files[i]) for i in idx], tf.string),
                np.array([self.skip[i] for i in idx], np.int64),
                np.array([self.take[i] for i in idx], np.int64),
            )
        )
        ds = ds.interleave(
            lambda f, s, t: tf.data.TFRecordDataset(f).skip(s).take(t),
            cycle_length=max(1, min(len(idx), 8)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        if by_file:
            return ds, sum(self.take[i] for i in idx)
        return ds.shard(shards, rank), max(0, (self.size - rank + shards - 1) // shards)


def _parts(cfg: JobConfig) -> tuple[Part, Optional[Part]]:
    """(training part, held-out part or None)."""
    assert cfg.data_dir is not None
    files = shard_files(cfg.data_dir, "train")
    if not files:
        raise JobUsageError(f"--data-dir {cfg.data_dir}: no train-*-of-* TFRecord files")
    counts = [count_records(f) for f in files]
    held = [held_out(cfg.val_split, n) for n in counts]
    train = Part(files, held, [n - k for n, k in zip(counts, held)])
    if cfg.val_split > 0:
        return train, Part(files, [0] * len(files), held)
    val_files = shard_files(cfg.val_dir or cfg.data_dir, "validation")
    if cfg.val_dir is not None and not val_files:
        val_files = shard_files(cfg.val_dir, "train")
        if not val_files:
            raise JobUsageError(f"--val-dir {cfg.val_dir}: no validation-*-of-* TFRecord files")
    if not val_files:
        return train, None
    val_counts = [count_records(f) for f in val_files]
    return train, Part(val_files, [0] * len(val_files), val_counts)


def make_tfrecord(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    train, val = _parts(cfg)
    size = train.size
    if cfg.dataset_size is not None:
        size = min(size, cfg.dataset_size)  # the epoch length; the shards still cycle whole
    check_size(size, global_batch, f"--data-dir {cfg.data_dir}")
    load = _loader(cfg)
    mine, n = train.shard(rank, shards)
    ds = train_batches(mine, n, load, cfg, rank, process_batch)
    val_ds, val_images = None, 0
    if val is not None and val.size:
        my_val, val_images = val.shard(rank, shards)
        val_ds = val_batches(my_val, load, cfg, process_batch)
    return DataSpec(
        ds,
        size,
        steps_per_epoch(size, global_batch, cfg.steps_per_epoch),
        f"tfrecord:{cfg.data_dir}",
        val_dataset=val_ds,
        val_images=val_images,
        val_size=val.size if val is not None else 0,
        num_classes=cfg.num_classes if cfg.workload != "gan" else None,
    )


def _loader(cfg: JobConfig) -> Any:
    px, gan, classes = cfg.image_size, cfg.workload == "gan", cfg.num_classes

    def load(record: tf.Tensor) -> Union[tuple[tf.Tensor, tf.Tensor], tf.Tensor]:
        ex = tf.io.parse_single_example(record, FEATURES)
        img = decode(ex["image/encoded"], px)
        if gan:
            return img
        label = ex["image/class/label"]
        ok = tf.logical_and(label >= 0, label < (classes or 0))
        check = tf.debugging.Assert(ok, [BAD_LABEL, label])
        with tf.control_dependencies([check]):
            return img, tf.cast(label, tf.int32)

    return load
