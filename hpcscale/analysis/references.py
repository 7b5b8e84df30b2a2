"""Checking a campaign's `references` against the derived table, so CI can gate on scaling.

One reference item (YAML) is, e.g. "weak-scaling efficiency at 8 nodes is at least 0.8":

    - metric: efficiency          # a column of derive.derive(): efficiency, speedup, overhead,
      selector: {nodes: 8, scaling: weak}   # images_per_s, epoch_time_s, only_comm_pct, ...
      value: 0.8
      lower: 0                    # tolerances are relative to value, as in ReFrame:
      upper: null                 #   bounds = value + lower*|value| .. value + upper*|value|
      unit: null                  #   null = unbounded on that side; lower <= 0 <= upper

Every cell the selector matches is checked; a selector that matches nothing is a failure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.errors import UsageError

ITEM_KEYS = frozenset({"metric", "selector", "value", "lower", "upper", "unit"})
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
    "negotiate_s": "s",
    "transport_s": "s",
    "exact_compute_s": "s",
    "exact_overlap_s": "s",
    "exact_exposed_comm_s": "s",
    "allreduce_bytes_per_step": "B",
    "bus_bandwidth_gbs": "GB/s",
}
_IDENTITY = ("model", "scaling", "device", "strategy", "cross_device_ops", "nodes", "ranks")


class ReferenceItemError(UsageError):
    """A malformed reference item in a campaign (exit code 2)."""


@dataclass(frozen=True)
class Reference:
    metric: str
    value: float
    selector: dict[str, Any] = field(default_factory=dict)
    lower: float | None = None
    upper: float | None = None
    unit: str | None = None

    @property
    def bounds(self) -> tuple[float, float]:
        scale = abs(self.value)
        lo = -math.inf if self.lower is None else self.value + self.lower * scale
        hi = math.inf if self.upper is None else self.value + self.upper * scale
        return lo, hi

    def describe(self) -> str:
        sel = ", ".join(f"{k}={v}" for k, v in self.selector.items())
        return f"{self.metric}[{sel}]" if sel else self.metric


@dataclass(frozen=True)
class ReferenceResult:
    reference: Reference
    measured: float | None
    passed: bool
    message: str
    cell: dict[str, Any] = field(default_factory=dict)


def parse_reference(item: Mapping[str, Any], index: int = 0) -> Reference:
    """Validate one item; the error names its position so the user can find it."""
    where = f"references[{index}]"
    if not isinstance(item, Mapping):
        raise ReferenceItemError(f"{where}: expected a mapping, got {type(item).__name__}")
    unknown = sorted(set(item) - ITEM_KEYS)
    if unknown:
        raise ReferenceItemError(f"{where}: unknown key(s) {', '.join(unknown)}")
    metric = item.get("metric")
    if not isinstance(metric, str) or not metric:
        raise ReferenceItemError(f"{where}.metric: a metric name is required")
    value = _number(item.get("value"), f"{where}.value", required=True)
    lower = _number(item.get("lower"), f"{where}.lower")
    upper = _number(item.get("upper"), f"{where}.upper")
    if lower is not None and lower > 0:
        raise ReferenceItemError(f"{where}.lower: a relative tolerance <= 0 (got {lower})")
    if upper is not None and upper < 0:
        raise ReferenceItemError(f"{where}.upper: a relative tolerance >= 0 (got {upper})")
    selector = item.get("selector") or {}
    if not isinstance(selector, Mapping):
        raise ReferenceItemError(f"{where}.selector: expected a mapping of column: value")
    unit = item.get("unit")
    if unit is not None and not isinstance(unit, str):
        raise ReferenceItemError(f"{where}.unit: expected a string")
    assert value is not None
    return Reference(metric, value, dict(selector), lower, upper, unit)


def check_references(
    derived: pd.DataFrame, references: Sequence[Mapping[str, Any] | Reference]
) -> list[ReferenceResult]:
    """One result per (reference, matching cell); a reference matching nothing fails once."""
    results: list[ReferenceResult] = []
    for i, item in enumerate(references):
        ref = item if isinstance(item, Reference) else parse_reference(item, i)
        results.extend(_check_one(derived, ref))
    return results


def all_passed(results: Sequence[ReferenceResult]) -> bool:
    return all(r.passed for r in results)


def _check_one(derived: pd.DataFrame, ref: Reference) -> list[ReferenceResult]:
    name = ref.describe()
    if ref.metric not in derived.columns:
        known = ", ".join(sorted(c for c in METRIC_UNITS if c in derived.columns))
        return [_fail(ref, f"{name}: unknown metric {ref.metric!r}; known: {known}")]
    unit_problem = _unit_problem(ref)
    if unit_problem:
        return [_fail(ref, f"{name}: {unit_problem}")]
    mask = pd.Series(True, index=derived.index)
    for key, wanted in ref.selector.items():
        if key not in derived.columns:
            return [_fail(ref, f"{name}: selector key {key!r} is not a column of the results")]
        mask &= _matches(derived[key], wanted)
    cells = derived[mask]
    if cells.empty:
        return [_fail(ref, f"{name}: no results match the selector")]
    lo, hi = ref.bounds
    unit = f" {ref.unit}" if ref.unit else ""
    out = []
    for _, row in cells.iterrows():
        cell = {k: row[k] for k in _IDENTITY if k in row.index}
        ident = ", ".join(f"{k}={v}" for k, v in cell.items() if k not in ref.selector)
        label = f"{name} ({ident})" if len(cells) > 1 and ident else name
        measured = float(row[ref.metric]) if pd.notna(row[ref.metric]) else None
        if measured is None:
            out.append(_fail(ref, f"FAIL {label}: not measured", cell))
            continue
        passed = lo <= measured <= hi
        status = "PASS" if passed else "FAIL"
        msg = (
            f"{status} {label} = {measured:.4g}{unit}; reference {ref.value:g}{unit}, "
            f"allowed [{lo:.4g}, {hi:.4g}]"
        )
        out.append(ReferenceResult(ref, measured, passed, msg, cell))
    return out


def _fail(ref: Reference, message: str, cell: dict[str, Any] | None = None) -> ReferenceResult:
    msg = message if message.startswith("FAIL") else f"FAIL {message}"
    return ReferenceResult(ref, None, False, msg, cell or {})


def _unit_problem(ref: Reference) -> str | None:
    if ref.unit is None or ref.metric not in METRIC_UNITS:
        return None
    given = _UNIT_ALIASES.get(ref.unit.strip().lower())
    expected = METRIC_UNITS[ref.metric]
    if given != expected:
        shown = "a plain ratio" if expected == "1" else expected
        return f"unit {ref.unit!r} does not match the metric, which is {shown}"
    return None


def _matches(column: pd.Series, wanted: Any) -> pd.Series:
    if wanted is None:
        return column.isna()
    if isinstance(wanted, bool) or pd.api.types.is_bool_dtype(column):
        flag = _as_bool(wanted)
        return column.map(lambda v: v is not None and not pd.isna(v) and bool(v) == flag)
    if isinstance(wanted, int | float) and not isinstance(wanted, bool):
        numeric = pd.to_numeric(column, errors="coerce")
        return pd.Series(np.isclose(numeric, float(wanted), rtol=1e-9), index=column.index)
    return column.map(lambda v: str(v).lower() == str(wanted).lower())


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "1", "on"}
    return bool(value)


def _number(value: Any, where: str, required: bool = False) -> float | None:
    if value is None:
        if required:
            raise ReferenceItemError(f"{where}: a number is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReferenceItemError(f"{where}: expected a finite number, got {value!r}")
    return float(value)
