"""`hpcscale init`'s starter shows the default framework's knob and trace through the framework
(Framework.starter, issue #30 G8), with the text it always had."""

from __future__ import annotations

from pathlib import Path

from hpcscale.cli.init import init as init_command
from hpcscale.frameworks import for_strategy
from hpcscale.model.system import load_system
from hpcscale.starter import starter_campaign


def test_the_starter_sweeps_the_default_frameworks_knob() -> None:
    """The shipped local profile's starter: the knob line and the timeline line, written out by
    hand as they read before the move, come from `strategy: horovod`'s framework."""
    starter = for_strategy("horovod").starter
    assert starter is not None
    assert starter.knob == (
        "  fusion_threshold_mb: [64]",
        "Horovod's tensor fusion buffer (MB): try [16, 64, 128]",
    )
    text = starter_campaign(load_system("local", relative_to=Path.cwd()), "local.yaml")
    lines = text.splitlines()
    knob = next(i for i, line in enumerate(lines) if line.startswith("  fusion_threshold_mb:"))
    assert lines[knob - 1].startswith("  batch: [16, 32]")
    assert lines[knob].split("# ") == [
        "  fusion_threshold_mb: [64]".ljust(len(lines[knob].split("# ")[0])),
        "Horovod's tensor fusion buffer (MB): try [16, 64, 128]",
    ]
    assert lines[knob + 1].startswith("repeats: 1 ")
    assert lines[knob + 2].startswith("collect: {timeline: true} ")
    assert lines[knob + 2].endswith("# Horovod timelines: the compute/communication split")
    assert lines[-1] == lines[knob + 2]


def test_init_help_names_the_knob_as_before() -> None:
    words = " ".join((init_command.__doc__ or "").split())
    assert words.startswith(
        "Start a study here: a commented campaign (nodes, layout, batch, a Horovod knob) and a "
        "copy of a system profile to edit"
    )
