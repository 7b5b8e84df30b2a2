"""Input pipelines, one module per format: synthetic (default), folder, flat, tfrecord, cub.

`make_data(cfg, rank, shards, global_batch, process_batch)` picks the format (--dataset; by
default synthetic, or folder with --data-dir), builds this rank's shard and measures the
pipeline's own throughput (untimed, on an iterator of its own) so an input-bound run shows in
metrics.json. `shards` = Horovod ranks (1 under mirrored); `process_batch` = what one next()
yields (the global batch under mirrored, where one process reads for every replica).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

import tensorflow as tf

from jobs.tf.config import JobConfig, JobUsageError
from jobs.tf.datasets.flat import make_flat
from jobs.tf.datasets.folder import make_folder
from jobs.tf.datasets.pipeline import images_per_s
from jobs.tf.datasets.spec import DataSpec
from jobs.tf.datasets.synthetic import make_synthetic
from jobs.tf.datasets.tfrecord import make_tfrecord

__all__ = ["DataSpec", "format_of", "make_data"]

Builder = Callable[[JobConfig, int, int, int, int], DataSpec]
BUILDERS: dict[str, Builder] = {
    "synthetic": make_synthetic,
    "folder": make_folder,
    "flat": make_flat,
    "tfrecord": make_tfrecord,
}


def format_of(cfg: JobConfig) -> str:
    """--dataset, by default synthetic without --data-dir and folder with it."""
    return cfg.dataset or ("folder" if cfg.data_dir is not None else "synthetic")


def _cub() -> Builder:
    """StackGAN's CUB layout (jobs/tf/datasets/cub.py), imported only when asked for."""
    try:
        module = importlib.import_module("jobs.tf.datasets.cub")
    except ModuleNotFoundError as exc:
        if exc.name != "jobs.tf.datasets.cub":
            raise
        raise JobUsageError("--dataset cub is not available in this jobs/ directory") from None
    return module.make_cub


def make_data(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    fmt = format_of(cfg)
    build = _cub() if fmt == "cub" else BUILDERS[fmt]
    spec = build(cfg, rank, shards, global_batch, process_batch)
    if spec.input_images_per_s is None:
        try:
            rate = images_per_s(spec.dataset, process_batch) * shards
        except tf.errors.InvalidArgumentError as exc:  # e.g. a TFRecord label out of range
            raise JobUsageError(
                f"--data-dir {cfg.data_dir}: {exc.message.splitlines()[0]}"
            ) from None
        spec = dataclasses.replace(spec, input_images_per_s=rate)
    return spec
