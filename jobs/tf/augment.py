"""Image augmentation for the classifier, as Keras preprocessing layers in the input pipeline.

Seed 004 augmented with Keras' ImageDataGenerator on the input side, so the layers run in
`dataset.map` (on the CPU, overlapped with training by prefetch) rather than inside the model:
their random state then never enters the weights that `--check-sync` compares across ranks.
The presets are the seed's two scripts; each `--aug-*` argument overrides its preset value.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import tensorflow as tf

from jobs.tf.config import JobConfig


@dataclass(frozen=True)
class Augmentation:
    zoom: float = 0.0  # fraction of the size, both ways (RandomZoom)
    shift: float = 0.0  # fraction of height and width (RandomTranslation)
    rotation: float = 0.0  # fraction of a full turn (RandomRotation)
    flip: bool = False  # horizontal (RandomFlip)

    @property
    def active(self) -> bool:
        return bool(self.zoom or self.shift or self.rotation or self.flip)

    def describe(self) -> str:
        if not self.active:
            return "none"
        return (
            f"zoom={self.zoom:g},shift={self.shift:g},rotation={self.rotation:g},flip={self.flip}"
        )


PRESETS: dict[str, Augmentation] = {
    "none": Augmentation(),
    # lab10.py (fresh/rotten fruits): zoom up to 1 %, shift up to 1 %, no flip
    "seed004_fruits": Augmentation(zoom=0.01, shift=0.01),
    # Lab10caltech256.py: rotation up to 5 %, zoom and shift up to 20 %, horizontal flip
    "seed004_caltech": Augmentation(zoom=0.2, shift=0.2, rotation=0.05, flip=True),
}


def augmentation_of(cfg: JobConfig) -> Augmentation:
    """The preset named by --augment with the --aug-* values given on top of it."""
    aug = PRESETS[cfg.augment]
    given = {
        "zoom": cfg.aug_zoom,
        "shift": cfg.aug_shift,
        "rotation": cfg.aug_rotation,
        "flip": True if cfg.aug_flip else None,
    }
    return replace(aug, **{k: v for k, v in given.items() if v is not None})


def layers(aug: Augmentation, seed: int) -> Optional[tf.keras.Sequential]:
    """The preprocessing layers of `aug` (None when it does nothing)."""
    if not aug.active:
        return None
    parts: list[tf.keras.layers.Layer] = []
    if aug.rotation:
        parts.append(tf.keras.layers.RandomRotation(aug.rotation, seed=seed))
    if aug.zoom:
        parts.append(tf.keras.layers.RandomZoom(aug.zoom, seed=seed + 1))
    if aug.shift:
        parts.append(tf.keras.layers.RandomTranslation(aug.shift, aug.shift, seed=seed + 2))
    if aug.flip:
        parts.append(tf.keras.layers.RandomFlip("horizontal", seed=seed + 3))
    return tf.keras.Sequential(parts, name="augment")


def augmented(dataset: tf.data.Dataset, aug: Augmentation, seed: int) -> tf.data.Dataset:
    """`dataset` of (images, labels) batches with `aug` applied to the images."""
    model = layers(aug, seed)
    if model is None:
        return dataset
    return dataset.map(
        lambda x, y: (model(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE
    ).prefetch(tf.data.AUTOTUNE)
