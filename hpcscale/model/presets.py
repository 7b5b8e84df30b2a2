"""Named extractor lists: data, not code paths. A campaign names one (`metrics: NAME`) or
extends one (`metrics: [NAME, {name: ..., pattern: ...}]`)."""

from __future__ import annotations

from hpcscale.model.extractors import Extractor

MLLOG = "mllog"  # read by hpcscale.collect.readers.mllog, not by regular expressions

# Horovod's synthetic benchmarks (TensorFlow, Keras and PyTorch print the same lines):
#   Iter #%d: %.1f img/sec per %s
#   Img/sec per %s: %.1f +-%.1f
#   Total img/sec on %d %s(s): %.1f +-%.1f
HOROVOD_SYNTHETIC: tuple[Extractor, ...] = (
    Extractor(
        "images_per_s",
        r"Total img/sec on \d+ \w+\(s\): (?P<value>[-+\d.eE]+)",
        unit="images/s",
        better="higher",
    ),
    Extractor(
        "images_per_s_per_rank",
        r"Img/sec per \w+: (?P<value>[-+\d.eE]+)",
        unit="images/s",
        better="higher",
    ),
    Extractor(
        "step_images_per_s",
        r"Iter #\d+: (?P<value>[-+\d.eE]+) img/sec per",
        reduce="series",
        unit="images/s per rank",
        better="higher",
        required=False,
    ),
)

PRESETS: dict[str, tuple[Extractor, ...]] = {"horovod_synthetic": HOROVOD_SYNTHETIC}
# Which figure a preset's scaling tables use, unless the campaign says otherwise.
PRESET_THROUGHPUT: dict[str, str] = {"horovod_synthetic": "images_per_s", MLLOG: "images_per_s"}
PRESET_NAMES: tuple[str, ...] = (*PRESETS, MLLOG)
