"""The report's figures, drawn for print: units on every axis, a legend outside the data,
constrained layout so nothing overlaps, one colour per group across a figure.

Each function takes analysis frames and returns a matplotlib Figure (no pyplot, no global
state), or None when the data has nothing to draw. `png_bytes` renders one.

Modules: style (what every figure shares), scaling (throughput, efficiency, extrapolation),
communication (overlap bars, fusion heat map), batch (batch-size curves,
speedup and time per iteration against the batch), targets (time to target), training
(learning curves, epochs to plateau), samples (the GANs' sample grids: the one module
that reads files, the PNGs the jobs wrote), compare (`hpcscale compare`'s overlay), render (the
report's PNGs: drawn only when their content changed, on every core).
"""

from __future__ import annotations

from hpcscale.report.figures.batch import batch_curves, batch_speedup, iteration_times
from hpcscale.report.figures.communication import fusion_heatmap, overlap_bars
from hpcscale.report.figures.samples import sample_grids
from hpcscale.report.figures.scaling import efficiency, extrapolation, throughput
from hpcscale.report.figures.style import png_bytes
from hpcscale.report.figures.targets import time_to_target
from hpcscale.report.figures.training import epochs_to_plateau, learning_curves

__all__ = [
    "batch_curves",
    "batch_speedup",
    "efficiency",
    "epochs_to_plateau",
    "extrapolation",
    "fusion_heatmap",
    "iteration_times",
    "learning_curves",
    "overlap_bars",
    "png_bytes",
    "sample_grids",
    "throughput",
    "time_to_target",
]
