"""The units a reference's `unit:` may name, and whether it names its metric's: pure, so that
`validate` (core) and `report --check` (analysis) say the same."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_UNIT_ALIASES: dict[str, str] = {
    "": "1",
    "1": "1",
    "ratio": "1",
    "fraction": "1",
    "x": "1",
    "s": "s",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "%": "%",
    "percent": "%",
    "pct": "%",
    "images/s": "images/s",
    "img/s": "images/s",
    "images/sec": "images/s",
    "bytes": "B",
    "b": "B",
    "gb/s": "GB/s",
}
METRIC_UNITS: dict[str, str] = {
    "speedup": "1",
    "efficiency": "1",
    "overhead": "1",
    "karp_flatt": "1",
    "overhead_pct": "%",
    "only_compute_pct": "%",
    "overlap_pct": "%",
    "only_comm_pct": "%",
    "images_per_s": "images/s",
    "epoch_time_s": "s",
    "fit_time_s": "s",
    "compute_s": "s",
    "only_comm_s": "s",
    "comm_s": "s",
    "wait_for_data_s": "s",
    "wait_for_other_tensor_data_s": "s",
    "waits_in_comm_s": "s",
    "negotiate_s": "s",
    "transport_s": "s",
    "exact_compute_s": "s",
    "exact_overlap_s": "s",
    "exact_exposed_comm_s": "s",
    "allreduce_bytes_per_step": "B",
    "bus_bandwidth_gbs": "GB/s",
    "comm_span_share": "1",  # a fraction of the timeline's span, not a percentage
}


def unit_problem(ref: Any, declared: Mapping[str, str] | None = None) -> str | None:
    """A reference's `unit:` that is not its metric's: hpcscale's own metrics (METRIC_UNITS),
    or the unit a command's extractor declares (`declared`: name -> unit)."""
    if not ref.unit:
        return None
    if ref.metric in METRIC_UNITS:
        expected = METRIC_UNITS[ref.metric]
        if _canonical(ref.unit) != expected:
            shown = "a plain ratio" if expected == "1" else expected
            return f"unit {ref.unit!r} does not match the metric, which is {shown}"
        return None
    base = _base(ref.metric)
    unit = (declared or {}).get(base)
    if unit is not None and _canonical(ref.unit) != _canonical(unit):
        return (
            f"unit {ref.unit!r} does not match the metric: the extractor of {base!r} "
            f"(workload.metrics) declares {unit!r}"
        )
    return None


def _canonical(unit: str) -> str:
    u = unit.strip()
    return _UNIT_ALIASES.get(u.lower(), u)


def _base(metric: str) -> str:
    """`samples_per_s_min` -> `samples_per_s`: a spread has its metric's unit."""
    for suffix in ("_min", "_max"):
        if metric.endswith(suffix):
            return metric[: -len(suffix)]
    return metric
