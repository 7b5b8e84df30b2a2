"""Validation over the held-out split, once per epoch, outside the timed steps.

Each rank evaluates its whole shard of the split (the data's `val_dataset`: finite, batched, the
last partial batch kept); the sums are averaged over ranks and divided, so the result is the mean
over every held-out image (ranks weighted by their images, not averaged as equals). `val_time_s`
is rank 0's wall time for it, including the wait for the slowest rank. Shared by the custom loop
(jobs/tf/harness.py) and the Keras-fit path (jobs/tf/keras_fit.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional

import tensorflow as tf

from jobs.tf.distribute import DistContext

VAL_KEYS = ("val_loss", "val_accuracy", "val_time_s")
Sums = tuple[float, float, float]  # (sum of per-image losses, correct predictions, images)


class HeldOut:
    def __init__(self, ctx: DistContext, images: int, measure: Callable[[], Sums]) -> None:
        self.ctx = ctx
        self.images = images  # in this rank's shard
        self.measure = measure

    def __call__(self) -> dict[str, float]:
        """val_loss, val_accuracy and val_time_s of the current weights (every rank calls it)."""
        t0 = time.monotonic()
        loss, hits, n = self.measure() if self.images else (0.0, 0.0, 0.0)
        tot = self.ctx.average_across({"val_n": n, "val_loss_sum": loss, "val_hits": hits})
        count = max(tot["val_n"], 1e-12)
        return {
            "val_loss": tot["val_loss_sum"] / count,
            "val_accuracy": tot["val_hits"] / count,
            "val_time_s": time.monotonic() - t0,
        }


def held_out_of(data: Any) -> tuple[Optional[tf.data.Dataset], int]:
    """(this rank's validation batches, its image count) of a DataSpec; (None, 0) without a
    held-out split (synthetic data, or none asked for)."""
    ds = getattr(data, "val_dataset", None)
    if ds is None:
        return None, 0
    images = getattr(data, "val_images", None)
    if images is None:
        images = int(sum(int(tf.shape(y)[0]) for _, y in ds))
    return ds, int(images)


def for_network(ctx: DistContext, data: Any, net: tf.keras.Model) -> Optional[HeldOut]:
    """Validation of a custom-loop classifier returning logits (jobs/tf/models/cnn.py)."""
    ds, images = held_out_of(data)
    if ds is None:
        return None

    @tf.function
    def batch_sums(images_: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, ...]:
        logits = tf.cast(net(images_, training=False), tf.float32)
        per = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        hits = tf.equal(tf.argmax(logits, axis=-1, output_type=labels.dtype), labels)
        n = tf.cast(tf.shape(labels)[0], tf.float32)
        return tf.reduce_sum(per), tf.reduce_sum(tf.cast(hits, tf.float32)), n

    def measure() -> Sums:
        sums = [0.0, 0.0, 0.0]
        for x, y in ds:
            for i, v in enumerate(batch_sums(x, y)):
                sums[i] += float(v)
        return sums[0], sums[1], sums[2]

    return HeldOut(ctx, images, measure)


def for_keras(ctx: DistContext, data: Any, model: tf.keras.Model) -> Optional[HeldOut]:
    """Validation of a compiled Keras model (metrics `loss` and `accuracy`) by `evaluate`, whose
    loss and accuracy are means over the images it saw."""
    ds, images = held_out_of(data)
    if ds is None:
        return None

    def measure() -> Sums:
        got = model.evaluate(ds, verbose=0, return_dict=True)
        return got["loss"] * images, got["accuracy"] * images, float(images)

    return HeldOut(ctx, images, measure)


def epoch_line(epoch: int, epochs: int, time_s: float, ips: float, values: dict[str, float]) -> str:
    """The per-epoch progress line rank 0 prints (after "[hpcscale] ")."""
    shown = " ".join(f"{k}={v:.4f}" for k, v in sorted(values.items()) if k != "val_time_s")
    return f"epoch {epoch + 1}/{epochs} time_s={time_s:.3f} images_per_s={ips:.1f} {shown}"
