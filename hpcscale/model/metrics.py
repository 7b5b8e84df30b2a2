"""The metrics analysis derives per cell, by name: a campaign's references may check them, so the
campaign model knows the names (hpcscale.analysis.derive computes them)."""

from __future__ import annotations

from hpcscale.model.vocab import RUN_EXTRA_COLUMNS, RUN_TIME_COLUMNS, TRACE_EXTRA_COLUMNS

DERIVED_METRICS: tuple[str, ...] = (
    "epoch_time_s",
    "images_per_s",
    "fit_time_s",
    "speedup",
    "efficiency",
    "overhead",
    "overhead_pct",
    "karp_flatt",
    "compute_s",
    "only_comm_s",
    "only_compute_pct",
    "overlap_pct",
    "only_comm_pct",
)


# What the results table and the analysis write beside a program's own metrics: run fields,
# what collect and the trace readers record, and the cell columns analysis.derive adds. A metric
# named like one would be overwritten by it (its speedup column would hold the metric), so
# validation refuses the name (tests/unit/collect/test_named_figure.py keeps the list true
# against a real collected table and its cells). The contract columns a program may fill
# (images_per_s, epoch_time_s, val_accuracy, ...) are not here.
TABLE_COLUMNS: tuple[str, ...] = (
    *TRACE_EXTRA_COLUMNS, *RUN_TIME_COLUMNS, *RUN_EXTRA_COLUMNS,
    # what a command's row says of its figures (collect.readers.command_row)
    "figure_metric", "figure_unit", "figure_kind", "metric_units", "extractors", "block_times_s",
)  # fmt: skip
CELL_COLUMNS: tuple[str, ...] = (
    "group", "axis", "axis_value", "base_axis_value", "scale", "baseline_problem", "scaled_on",
    "speedup_on", "efficiency_tolerance", "time_resolution_s", "repeats", "run_ids",
    "base_repeats", "gpus", "waits_summed", *DERIVED_METRICS,
)  # fmt: skip
# a metric m's interval, spread and baseline columns (m_lo, base_m, ...)
COLUMN_SUFFIXES: tuple[str, ...] = ("_lo", "_hi", "_level", "_min", "_max")
BASE_PREFIX = "base_"


def reserved_problem(name: str, reserved: frozenset[str], metrics: frozenset[str]) -> str | None:
    """Why a program's metric may not be called `name` (None: it may): a column the table or the
    analysis writes (`reserved`), or the interval/baseline column of another of its `metrics`
    or of a table figure."""
    if name in reserved:
        return f"{name!r} is a column hpcscale writes itself; name the metric otherwise"
    for m in metrics - {name}:
        if name == BASE_PREFIX + m or any(name == m + s for s in COLUMN_SUFFIXES):
            return f"{name!r} is where the analysis puts the baseline or interval of {m!r}"
    return None
