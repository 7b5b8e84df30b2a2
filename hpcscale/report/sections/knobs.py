"""The sections on what a study varies at a fixed scale: where the epoch's time goes (overlap),
tensor fusion, fp16 / mixed precision, hierarchical all-reduce, batch size, CPU layouts. The
sweeps themselves are chosen by `hpcscale.analysis.sweeps`."""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis import sweeps, tables
from hpcscale.report import figures
from hpcscale.report.labels import with_setting
from hpcscale.report.model import Section, Table, plot_if
from hpcscale.report.sections.noise import comparison_table

# Table column -> cell column: how a knob table's rows are matched back to their cells.
OVERLAP_MATCH: dict[str, str] = {
    "Epoch time (s)": "epoch_time_s",
    "Overall communication": "comm_s",
}


def overlap_section(cells: pd.DataFrame) -> Section | None:
    timed = sweeps.timed(cells)
    if timed.empty:
        return None
    text = [
        "From the Horovod timeline, per epoch: Computation = T − C (epoch time minus overall "
        "communication), Only communication = C − wait for data − wait for other tensor data, "
        "Overlap % = the two waits / T. The three percentages add up to 100. CPU timelines "
        "record no waits, so there Only communication = C.",
    ]
    if "exact_compute_s" in timed.columns and timed["exact_compute_s"].notna().any():
        text.append(
            "The exact columns sweep rank 0's step spans against the timeline's communication "
            "intervals and are named by what they measure: step time outside communication, "
            "communication inside a step (on synchronous runs the all-reduce runs inside the "
            "step: this is not communication hidden behind compute), and communication "
            "between steps."
        )
    table = with_setting(
        tables.overlap_table(timed),
        timed,
        OVERLAP_MATCH,
        ["model", "scaling", "axis_value", "batch_per_rank"],
    )
    return Section(
        "overlap",
        "Compute / communication overlap",
        text,
        [Table("overlap", "Compute and communication per epoch (s, %)", table)],
        plot_if(
            "overlap",
            "Compute, overlap and communication per run",
            figures.overlap_bars(timed),
            "Each bar is one matrix cell's epoch, split into computation only, overlap and "
            "communication only.",
        ),
    )


def fusion_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.fusion_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.fusion_table(rows),
        rows,
        {
            **OVERLAP_MATCH,
            "Cycle time (ms)": "cycle_time_ms",
            "Fusion buffer (MB)": "fusion_threshold_mb",
        },
        ["fusion_threshold_mb", "cycle_time_ms"],
    )
    return Section(
        "fusion",
        "Tensor fusion: cycle time x fusion buffer",
        ["Horovod tensor fusion: HOROVOD_CYCLE_TIME (ms) x HOROVOD_FUSION_THRESHOLD (MB)."],
        _with_comparisons([Table("fusion", "Cycle time x fusion buffer", table)], rows, "fusion"),
        plot_if("fusion", "Fusion heat map", figures.fusion_heatmap(rows)),
    )


def precision_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.precision_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.precision_table(rows), rows, OVERLAP_MATCH, ["fp16_allreduce", "mixed_precision"]
    )
    return Section(
        "precision",
        "FP16 compression and mixed precision",
        ["FP16 = Horovod fp16 compression of the gradients; MP = Keras mixed precision."],
        _with_comparisons(
            [Table("precision", "FP16 all-reduce / mixed precision", table)], rows, "precision"
        ),
    )


def hierarchical_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.hierarchical_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.hierarchical_table(rows),
        rows,
        {**OVERLAP_MATCH, "Fusion buffer (MB)": "fusion_threshold_mb"},
        ["hierarchical_allreduce", "fusion_threshold_mb"],
    )
    return Section(
        "hierarchical",
        "Hierarchical all-reduce",
        ["HOROVOD_HIERARCHICAL_ALLREDUCE=1 reduces within a node first, then across nodes."],
        _with_comparisons(
            [Table("hierarchical", "Hierarchical all-reduce", table)], rows, "hierarchical"
        ),
    )


def batch_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.batch_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.batch_sweep_table(rows),
        rows,
        {"Model": "model", "Batch size": "batch_per_rank", "Epoch time (s)": "epoch_time_s"},
        ["model", "device", "batch_per_rank"],
    )
    return Section(
        "batch",
        "Batch size",
        ["Throughput against the per-rank batch size, CPU and GPU."],
        [Table("batch", "Batch-size sweep", table)],
        plot_if("batch", "Batch-size curves", figures.batch_curves(rows)),
    )


def layout_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.layout_sweep(cells)
    if rows.empty:
        return None
    return Section(
        "layouts",
        "CPU layouts",
        ["Ranks per node x threads per rank on the same nodes (e.g. 1x28, 2x14, 4x7)."],
        _with_comparisons(
            [Table("layouts", "CPU layouts", tables.layout_table(rows))], rows, "layouts"
        ),
    )


def _with_comparisons(tabs: list[Table], rows: pd.DataFrame, key: str) -> list[Table]:
    """A knob section's tables plus which setting is faster, only where the intervals say so."""
    compare = comparison_table(rows, f"{key}_comparisons")
    return tabs if compare is None else [*tabs, compare]
