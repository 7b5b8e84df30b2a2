"""The image-folder source of the PyTorch programs (`--dataset folder`, the default with
--data-dir): jobs/tf/datasets/folder.py's layout and arithmetic without TensorFlow, so a
`strategy: [horovod, torch_ddp]` matrix reads the same images the same way.

- layout: one sub-folder per class, classes in sorted order (label = index), the image files
  (IMAGE_SUFFIXES) directly in each, sorted; every rank lists the same pairs in the same order;
- --dataset-size N below the image count: the same seeded subset as the TF program (Python's
  random.Random(seed) shuffle, the first N, sorted);
- fewer images than one global batch is a usage error; rank r reads images r, r + world, ...;
- each rank's stream: its shard in a new seeded order each pass, repeated, cut into whole
  batches (TF's shuffle -> repeat -> batch(drop_remainder)), decoded per batch by one
  background thread a few batches ahead (TF's map + prefetch; memory stays a few batches);
- decoding: Pillow to RGB (grey replicated, alpha dropped, a GIF's first frame), bilinear resize
  with half-pixel centres and no antialiasing (what tf.image.resize does), then x / 127.5 - 1:
  [-1, 1] for every model, as jobs/tf/datasets/pipeline.py `decode`.
No validation split: the torch programs have no held-out evaluation yet.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, UnidentifiedImageError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif"}  # = jobs/tf/datasets/pipeline.py's
PREFETCH = 2  # batches decoded ahead of the training step
Pairs = list[tuple[str, int]]
Batch = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]


class DataUsageError(Exception):
    """Bad data on disk (no folder, no images, too few, undecodable): exit 2, one line."""


@dataclass(frozen=True)
class Folder:
    root: Path
    classes: list[str]
    train: Pairs  # every rank's training images (path, label), in the order all ranks share

    def shard(self, rank: int, world: int) -> Pairs:
        """This rank's disjoint slice: images rank, rank + world, ..."""
        return self.train[rank::world]


def list_folder(root: Path, global_batch: int, dataset_size: Optional[int], seed: int) -> Folder:
    """The classes and the training images, as jobs/tf/datasets/folder.py lists them."""
    if not root.is_dir():
        raise DataUsageError(f"--data-dir {root}: not a directory")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files = [image_files(root / c) for c in classes]
    if not any(files):
        raise DataUsageError(
            f"--data-dir {root}: no images found (expected one sub-folder per class holding "
            f"{', '.join(sorted(IMAGE_SUFFIXES))} files)"
        )
    train = [(str(p), label) for label, paths in enumerate(files) for p in paths]
    if dataset_size is not None and dataset_size < len(train):
        random.Random(seed).shuffle(train)  # the same subset on every rank, and as TF's
        train = sorted(train[:dataset_size])
    if len(train) < global_batch:
        raise DataUsageError(
            f"--data-dir {root}: {len(train)} training images, fewer than one global batch "
            f"({global_batch})"
        )
    return Folder(root, classes, train)


def image_files(directory: Path) -> list[Path]:
    return sorted(
        f for f in directory.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file()
    )


def decode(path: str, px: int) -> torch.Tensor:
    """One file -> a (3, px, px) float32 image in [-1, 1]."""
    try:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB"))
    except (UnidentifiedImageError, OSError) as exc:
        raise DataUsageError(f"--data-dir: {path}: cannot decode ({exc})") from None
    x = torch.from_numpy(rgb.copy()).permute(2, 0, 1).float()
    if x.shape[1:] != (px, px):
        x = F.interpolate(x[None], size=(px, px), mode="bilinear", align_corners=False)[0]
    return x / 127.5 - 1.0


def order(n: int, seed: int, rank: int) -> Iterator[int]:
    """Indices 0..n-1 in a new order each pass, seeded by (seed, rank), forever."""
    rng = np.random.default_rng([seed, rank])
    while True:
        yield from rng.permutation(n).tolist()


def batches(
    pairs: Pairs, px: int, batch: int, seed: int, rank: int, labelled: bool
) -> Iterator[Batch]:
    """Whole batches of the repeated, reshuffled stream (they run across pass boundaries)."""
    idx = order(len(pairs), seed, rank)
    while True:
        chosen = [pairs[next(idx)] for _ in range(batch)]
        images = torch.stack([decode(p, px) for p, _ in chosen])
        if labelled:
            yield images, torch.tensor([label for _, label in chosen], dtype=torch.long)
        else:
            yield images


class Prefetched:
    """An iterator run by a daemon thread up to PREFETCH items ahead; its error is raised by
    the next() that would have had the item."""

    def __init__(self, it: Iterator[Any]) -> None:
        self._it = it
        self._q: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=PREFETCH)
        self._stop = threading.Event()
        threading.Thread(target=self._fill, daemon=True, name="folder-prefetch").start()

    def _fill(self) -> None:
        try:
            for item in self._it:
                while not self._stop.is_set():
                    try:
                        self._q.put((True, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
        except Exception as exc:  # handed to the consumer
            self._q.put((False, exc))

    def __iter__(self) -> Prefetched:
        return self

    def __next__(self) -> Any:
        ok, item = self._q.get()
        if not ok:
            raise item
        return item

    def close(self) -> None:
        self._stop.set()


def images_per_s(it: Iterator[Batch], batch: int, least_s: float = 1.0) -> float:
    """This rank's decoding alone, on an iterator of its own (jobs/tf/datasets/pipeline.py
    `images_per_s`): one batch to start, then batches for `least_s` seconds, at least two."""
    next(it)
    n, t0 = 0, time.perf_counter()
    while n < 2 or time.perf_counter() - t0 < least_s:
        next(it)
        n += 1
    return n * batch / (time.perf_counter() - t0)
