"""DataSpec: what an input format hands the harness (and the Keras `fit` and StackGAN jobs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import tensorflow as tf


@dataclass(frozen=True)
class DataSpec:
    dataset: tf.data.Dataset  # this process' training batches, repeated (global batch: mirrored)
    dataset_size: int  # training images in one epoch, all ranks together
    steps_per_epoch: int
    description: str  # metrics.json `data`: "synthetic", the folder, or "<format>:<directory>"
    # This rank's shard of the whole held-out split: finite, batched by the process batch, the
    # last partial batch kept; None without a validation split.
    val_dataset: Optional[tf.data.Dataset] = None
    val_images: int = 0  # images in this rank's validation shard
    val_size: int = 0  # images in the whole validation split, all ranks
    classes: Optional[list[str]] = None  # class names, when the data names them
    num_classes: Optional[int] = None  # what the data says (None: unlabelled or not known)
    input_images_per_s: Optional[float] = None  # the pipeline alone, all ranks together
