"""A run's throughput from its per-epoch lists: a rate that adds up, never a mean of rates.

A run's images/s is the images of its timed epochs over their total time. The mean of the
per-epoch rates is not: epochs of 10 s and 30 s at 1,000 images each are 2,000 images in 40 s,
50 images/s, while the rates 100 and 33.3 average 66.7. With the mean epoch time beside it,
images_per_s x epoch_time_s is then the images of one epoch for every run.

An epoch's images are global_batch x steps_per_epoch (jobs/tf/harness.py runs a fixed number of
steps per epoch and writes `images_per_s[i]` as that over `epoch_time_s[i]`). Lists that disagree
with it (some epoch's rate x time is another number of images), with each other (lengths) or with
`epochs`, or an epoch time that is not a positive number, leave the figure out (NaN) with the
reason: a throughput built on them would be a guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

# Relative slack for images_per_s[i] x epoch_time_s[i] against the images of an epoch: the
# writer's own float rounding (one division, one JSON round trip) is ~1e-16.
IMAGES_RTOL = 1e-9


class Rate(NamedTuple):
    """A run's figure (NaN when its lists cannot support one) and why it is missing."""

    value: float
    problem: str | None = None


def per_epoch_images(epoch_time_s: Sequence[float], images_per_s: Sequence[float]) -> list[float]:
    """The images each epoch processed, as the lists say (rate x time)."""
    return [r * t for r, t in zip(images_per_s, epoch_time_s, strict=True)]


def throughput(
    epoch_time_s: Sequence[float],
    images_per_s: Sequence[float],
    images_per_epoch: float,
    epochs: int | None = None,
) -> Rate:
    """Images of the timed epochs / their total time, from metrics.json's per-epoch lists.

    `images_per_epoch` is global_batch x steps_per_epoch; every epoch's rate x time must give it
    (within float rounding), else the lists contradict each other and the figure is left out;
    so are lists with another length than `epochs` (when given): epochs are missing."""
    times, rates = list(epoch_time_s), list(images_per_s)
    if not times:
        return Rate(math.nan, "metrics.json: no timed epoch in epoch_time_s: no throughput")
    if len(rates) != len(times) or (epochs is not None and len(times) != epochs):
        said = "" if epochs is None else f"epochs = {epochs}, "
        return Rate(
            math.nan,
            f"metrics.json: {said}epoch_time_s has {len(times)} entries, images_per_s "
            f"{len(rates)}: throughput left out",
        )
    bad = [i for i, t in enumerate(times) if not (math.isfinite(t) and t > 0)]
    if bad:
        return Rate(
            math.nan,
            f"metrics.json: epoch_time_s[{bad[0]}] is {times[bad[0]]!r}, not a positive time: "
            "throughput left out",
        )
    images = per_epoch_images(times, rates)
    for i, n in enumerate(images):
        if not math.isclose(n, images_per_epoch, rel_tol=IMAGES_RTOL):
            return Rate(
                math.nan,
                f"metrics.json: epoch {i + 1}: images_per_s x epoch_time_s = {n:.6g} images, "
                f"not global_batch x steps_per_epoch = {images_per_epoch:.6g}: throughput left out",
            )
    return Rate(len(times) * images_per_epoch / math.fsum(times))
