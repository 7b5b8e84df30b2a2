"""What every input format shares: sharding by rank, decoding, batching, prefetch and thread
options, the seeded hold-out split, and the pipeline's own throughput.

Every rank lists the same files in the same order and takes a disjoint slice; the training
stream repeats (every rank runs the same number of steps, jobs.tf.config.steps_per_epoch), the
validation stream is finite and keeps its last partial batch.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar, Union

import tensorflow as tf

from jobs.tf.config import JobConfig, JobUsageError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif"}
T = TypeVar("T")


def shard(items: Sequence[T], rank: int, shards: int) -> list[T]:
    """This rank's disjoint slice: items rank, rank + shards, ..."""
    return list(items[rank::shards])


def held_out(frac: float, n: int) -> int:
    """How many of n items a validation fraction holds out: frac * n rounded half up, at least
    1 when frac > 0 and n > 1, and never all of them."""
    if frac <= 0 or n < 2:
        return 0
    return max(1, min(n - 1, math.floor(frac * n + 0.5)))


def split(items: Sequence[T], frac: float, rng: random.Random) -> tuple[list[T], list[T]]:
    """(train, validation): a seeded choice of held_out(frac, n) items, both in input order."""
    k = held_out(frac, len(items))
    chosen = set(rng.sample(range(len(items)), k))
    train = [x for i, x in enumerate(items) if i not in chosen]
    return train, [x for i, x in enumerate(items) if i in chosen]


def image_files(directory: Path) -> list[Path]:
    """The image files directly in `directory`, sorted (the same list on every rank)."""
    return sorted(
        f for f in directory.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file()
    )


def decode(data: tf.Tensor, px: int, center_crop: Union[int, bool, None] = None) -> tf.Tensor:
    """Encoded bytes -> a px x px float image in [-1, 1]. With `center_crop` (True: the shorter
    side; an int: that many px, at most the shorter side) a centred square is cut first."""
    img = tf.io.decode_image(data, channels=3, expand_animations=False)
    if center_crop is not None and center_crop is not False:
        h, w = tf.shape(img)[0], tf.shape(img)[1]
        side = tf.minimum(h, w)
        if center_crop is not True:
            side = tf.minimum(side, int(center_crop))
        top, left = (h - side) // 2, (w - side) // 2
        img = img[top : top + side, left : left + side]
    img = tf.image.resize(img, (px, px))
    return tf.cast(img, tf.float32) / 127.5 - 1.0


def check_size(size: int, global_batch: int, where: str) -> None:
    if size < global_batch:
        raise JobUsageError(
            f"{where}: {size} training images, fewer than one global batch ({global_batch})"
        )


def options(cfg: JobConfig) -> tf.data.Options:
    opts = tf.data.Options()
    if cfg.threads:
        opts.threading.private_threadpool_size = max(1, cfg.threads)
    return opts


def train_batches(
    ds: tf.data.Dataset, n: int, load: Any, cfg: JobConfig, rank: int, batch: int
) -> tf.data.Dataset:
    """Shuffled (seed + rank, reshuffled each pass), repeated, decoded in parallel, batched
    whole, prefetched: what one rank's training steps read."""
    ds = ds.shuffle(max(1, min(n, 10_000)), seed=cfg.seed + rank, reshuffle_each_iteration=True)
    ds = ds.repeat().map(load, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(batch, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options(cfg))


def val_batches(ds: tf.data.Dataset, load: Any, cfg: JobConfig, batch: int) -> tf.data.Dataset:
    """Finite, in order, the last partial batch kept: one pass is this rank's whole shard."""
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(batch, drop_remainder=False)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options(cfg))


def images_per_s(ds: tf.data.Dataset, batch: int, least_s: float = 1.0) -> float:
    """The pipeline alone, read by this process on an iterator of its own: one batch to start
    it (files opened, threads up), then batches for `least_s` seconds (at least two), long
    enough that the batches prefetched while the first one was made weigh little."""
    it = iter(ds)
    next(it)
    n, t0 = 0, time.perf_counter()
    while n < 2 or time.perf_counter() - t0 < least_s:
        next(it)
        n += 1
    elapsed = time.perf_counter() - t0
    del it
    return n * batch / elapsed
