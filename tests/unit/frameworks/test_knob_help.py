"""What a framework's knob does is the framework's to say (Framework.knob_help); the ground's
vocabulary holds its name, type, label and unit. docs/reference.md reads both."""

from __future__ import annotations

from hpcscale.model import vocab
from hpcscale.reference import KNOB_HELP, _help


def test_every_knob_is_explained_by_the_ground_or_a_framework() -> None:
    assert [t.name for t in vocab.KNOB_TERMS.values() if not _help(t)] == []


def test_a_knob_is_explained_by_the_first_framework_reading_it() -> None:
    """fusion_threshold_mb is read by horovod_tf and by tf_distribute (accepted, changes
    nothing): horovod_tf, first in the registry, says what it does, as the reference always
    said it."""
    assert KNOB_HELP["fusion_threshold_mb"] == "Horovod tensor fusion buffer"
    assert KNOB_HELP["bucket_cap_mb"] == "DDP gradient bucket (torch_ddp)"
    assert vocab.KNOB_TERMS["fusion_threshold_mb"].help == ""  # the ground names no framework
