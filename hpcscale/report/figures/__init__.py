"""The report's figures, drawn for print: units on every axis, a legend outside the data,
constrained layout so nothing overlaps, one colour per group across a figure.

Each function takes analysis frames and returns a matplotlib Figure (no pyplot, no global
state), or None when the data has nothing to draw. `png_bytes` renders one.

Modules: style (what every figure shares), scaling (throughput, efficiency, extrapolation),
communication (overlap bars, fusion heat map), batch (batch-size curves), targets (time to
target).
"""

from __future__ import annotations

from hpcscale.report.figures.batch import batch_curves
from hpcscale.report.figures.communication import fusion_heatmap, overlap_bars
from hpcscale.report.figures.scaling import efficiency, extrapolation, throughput
from hpcscale.report.figures.style import png_bytes
from hpcscale.report.figures.targets import time_to_target

__all__ = [
    "batch_curves",
    "efficiency",
    "extrapolation",
    "fusion_heatmap",
    "overlap_bars",
    "png_bytes",
    "throughput",
    "time_to_target",
]
