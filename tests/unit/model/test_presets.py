"""Extractor presets (a command campaign's `metrics: NAME`): named by the registry's lines
(hpcscale.model.registry.PRESETS), their extractors defined in the ground, which validation
loads without importing anything above it."""

from __future__ import annotations

import pytest

from hpcscale.model import registry
from hpcscale.model.command import figure_of, reading_of
from hpcscale.model.extractors import Extractor
from hpcscale.model.presets import PRESET_NAMES, PRESET_THROUGHPUT, preset_extractors

# by hand: the names campaigns use today, and the figures they scale on
NAMES = ("horovod_synthetic", "mllog")


def test_the_names_and_figures_campaigns_use() -> None:
    assert PRESET_NAMES == NAMES
    assert PRESET_THROUGHPUT == {"horovod_synthetic": "images_per_s", "mllog": "images_per_s"}
    assert figure_of("horovod_synthetic", None, None) == ("images_per_s", "throughput")


def test_every_preset_line_is_extractors_in_the_ground() -> None:
    """The ground imports nothing above it: a line pointing outside hpcscale.model would make
    validation import it."""
    for name, line in registry.PRESETS.items():
        assert line.where.startswith("hpcscale.model."), name
        found = preset_extractors(name)
        assert found and all(isinstance(e, Extractor) for e in found)


def test_a_campaign_reads_a_preset_by_its_name() -> None:
    extractors, mllog = reading_of(["horovod_synthetic"])
    assert [e.name for e in extractors] == [
        "images_per_s",
        "images_per_s_per_rank",
        "step_images_per_s",
    ]
    assert mllog is False
    assert reading_of("mllog") == ([], True)
    with pytest.raises(ValueError, match=r"unknown preset 'horovod_synth'.*horovod_synthetic"):
        reading_of("horovod_synth")
