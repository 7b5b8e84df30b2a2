"""Named extractor lists: data, not code paths. A campaign names one (`metrics: NAME`) or
extends one (`metrics: [NAME, {name: ..., pattern: ...}]`). The names, the program each reads
and the figure each scales on are the registry's lines (hpcscale.model.registry.PRESETS); the
extractors are defined here, in the ground, so that validation reads them without importing
anything above it. A preset for another program's output is one tuple here and one line there."""

from __future__ import annotations

from functools import cache

from hpcscale.model.extractors import Extractor
from hpcscale.model.registry import PRESETS, load

MLLOG = "mllog"  # read by hpcscale.collect.readers.mllog, not by regular expressions

# Throughput lines of synthetic image benchmarks (the registry line names the scripts):
#   Iter #%d: %.1f img/sec per %s
#   Img/sec per %s: %.1f +-%.1f
#   Total img/sec on %d %s(s): %.1f +-%.1f
SYNTHETIC_IMAGES: tuple[Extractor, ...] = (
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

# Which figure a preset's scaling tables use, unless the campaign says otherwise.
PRESET_THROUGHPUT: dict[str, str] = {
    **{name: line.throughput for name, line in PRESETS.items()},
    MLLOG: "images_per_s",
}
PRESET_NAMES: tuple[str, ...] = (*PRESETS, MLLOG)


@cache
def preset_extractors(name: str) -> tuple[Extractor, ...]:
    """The extractors of a preset the registry names (KeyError for any other name)."""
    found: tuple[Extractor, ...] = load(PRESETS[name].where)
    return found
