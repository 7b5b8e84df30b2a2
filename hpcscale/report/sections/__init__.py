"""Which sections a campaign's data supports, and their tables and figures.

A section appears only when the data has what it shows (a quickstart has no fusion sweep), and
then it has at least one non-empty table. The analysis chooses the cells and computes the
numbers; these modules only give them titles, text, tables and figures. Nothing is read from
disk (provenance is read by build.py and passed in).

Modules: scaling (scaling, efficiency, extrapolation), knobs (overlap, fusion, precision,
hierarchical all-reduce, batch size and its speedup, CPU layouts), iteration (time per iteration
against the batch), model (parameters per model), targets (time to target), training
(learning curves, epochs to plateau, sample grids: the one section whose figure reads files),
references,
quality (Data quality, and how tables mark flagged cells).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from hpcscale.analysis.context import TableContext
from hpcscale.analysis.derive import derive
from hpcscale.analysis.metric import frame_metric
from hpcscale.analysis.overlap import SOURCE, cell_sources
from hpcscale.analysis.quality import cell_flags, quality_flags
from hpcscale.analysis.references import Reference, check_references
from hpcscale.report.model import CampaignReport, Section
from hpcscale.report.sections.command import command_section
from hpcscale.report.sections.iteration import iteration_section
from hpcscale.report.sections.knobs import (
    batch_section,
    fusion_section,
    hierarchical_section,
    layout_section,
    overlap_section,
    precision_section,
)
from hpcscale.report.sections.model import params_section
from hpcscale.report.sections.quality import mark_cell_tables, quality_section
from hpcscale.report.sections.references import references_section
from hpcscale.report.sections.scaling import (
    efficiency_section,
    extrapolation_section,
    scaling_section,
)
from hpcscale.report.sections.targets import target_section
from hpcscale.report.sections.training import samples_section, training_section

__all__ = ["campaign_report"]


def campaign_report(
    runs: pd.DataFrame,
    name: str,
    description: str = "",
    references: Sequence[Reference | Mapping[str, Any]] = (),
    provenance: Section | None = None,
    targets: Sequence[Any] = (),
    max_nodes: int | None = None,
    context: TableContext | None = None,
) -> CampaignReport:
    """Every applicable section for one campaign's runs (one row per run, collector columns).
    `references` are the campaign's (`hpcscale.model.campaign.Reference`, or mappings with its
    keys). `targets` are `analysis.targets.TargetSpec`s for time to target (none: the workload
    kind's default); `max_nodes` is the system's, to mark predictions beyond it. `context`:
    what travels beside the table (planned, unreadable, unfinished runs; none for a table
    known by its rows alone)."""
    ctx = context or TableContext()
    # what the campaign scales on (a table of its own: as its rows say): every table and figure
    # is headed by it
    metric = ctx.metric if context is not None else frame_metric(runs)
    cells = derive(runs, planned=ctx.planned_frame, metric=metric)
    cells[SOURCE] = cell_sources(cells, runs)  # which trace each cell's split came from
    flags = quality_flags(runs, ctx, cells)
    cells["flags"] = cell_flags(cells, flags)
    notes: list[str] = []
    results = check_references(cells, references) if references else []
    builders: list[Callable[[], Section | None]] = [
        lambda: scaling_section(cells, metric),
        lambda: efficiency_section(cells, metric),
        lambda: overlap_section(cells, metric),
        lambda: fusion_section(cells),
        lambda: precision_section(cells),
        lambda: hierarchical_section(cells),
        lambda: batch_section(cells, runs, targets, metric),
        lambda: iteration_section(cells, runs, metric),
        lambda: layout_section(cells, metric),
        lambda: target_section(runs, notes, targets),
        lambda: training_section(runs, notes),
        lambda: samples_section(runs, notes),
        lambda: extrapolation_section(runs, cells, notes, max_nodes, metric),
        lambda: params_section(runs),
    ]
    builders.insert(0, lambda: command_section(runs, metric))  # a command's program first
    sections = [s for s in (b() for b in builders) if s is not None]
    sections = [mark_cell_tables(s, cells, metric) for s in sections]
    sections.append(quality_section(runs, flags, ctx))
    if references:
        sections.append(references_section(results))
    if provenance is not None:
        sections.append(provenance)
    return CampaignReport(name, description, sections, runs, cells, results, notes, metric)
