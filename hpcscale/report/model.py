"""What a report is made of, independent of how it is written (Markdown, HTML, CSV)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from hpcscale.model.scaling_metric import ScalingMetric
from hpcscale.report.figures.fold import note_of

if TYPE_CHECKING:  # a plot's figure may be a reused PNG (figures.reuse): no matplotlib needed
    from matplotlib.figure import Figure


@dataclass
class Table:
    key: str  # file-name safe; also the CSV name
    title: str
    frame: pd.DataFrame
    note: str = ""


@dataclass
class Plot:
    key: str  # file-name safe; the PNG is <campaign>-<key>.png
    title: str
    figure: Figure
    caption: str = ""
    file: str = ""  # set when written: path relative to the report directory
    png: bytes = b""  # set when rendered


@dataclass
class Section:
    key: str
    title: str
    text: list[str] = field(default_factory=list)  # paragraphs, plain text
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)


@dataclass
class CampaignReport:
    """One campaign's sections plus what the terminal summary and `--check` need."""

    name: str
    description: str
    sections: list[Section]
    runs: pd.DataFrame  # the collector's tidy table
    cells: pd.DataFrame  # derive.derive(runs)
    reference_results: list = field(default_factory=list)  # analysis.references.ReferenceResult
    notes: list[str] = field(default_factory=list)  # what was left out and why
    # what the throughput (or time) column holds: images/s, or a command's own metric
    metric: ScalingMetric = field(default_factory=ScalingMetric)


def plot_if(key: str, title: str, figure: Figure | None, caption: str = "") -> list[Plot]:
    """A section's plots: none when the figure function had nothing to draw. What the figure
    folded (figures.fold: too many lines to tell apart) is said after the caption."""
    if figure is None:
        return []
    return [Plot(key, title, figure, " ".join(filter(None, [caption, note_of(figure)])))]
