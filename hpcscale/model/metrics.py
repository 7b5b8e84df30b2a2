"""The metrics analysis derives per cell, by name: a campaign's references may check them, so the
campaign model knows the names (hpcscale.analysis.derive computes them)."""

from __future__ import annotations

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
