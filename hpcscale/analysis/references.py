"""Checking a campaign's `references` against the derived table, so CI can gate on scaling.

The schema is the campaign's (`hpcscale.model.campaign.Reference`); one item (YAML) is, e.g.
"weak-scaling efficiency at 8 nodes is at least 0.8":

    - metric: efficiency          # a column of derive.derive(): efficiency, speedup, overhead,
      where: {nodes: 8, scaling: weak}   # images_per_s, epoch_time_s, only_comm_pct, ...
      value: 0.8
      lower: 0                    # tolerances are fractions of value, their sign ignored:
      upper: null                 #   allowed = value - |lower|*|value| .. value + |upper|*|value|
      unit: ""                    #   null = unbounded on that side; "" = unit not stated

`lower: 0.1` and ReFrame's `lower: -0.1` both mean "down to 10 % below value". Every cell
`where` matches is checked; a `where` that matches nothing is a failure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from hpcscale.model.campaign import Reference
from hpcscale.model.errors import UsageError
from hpcscale.model.units import METRIC_UNITS, unit_problem
from hpcscale.model.vocab import arg_columns

ITEM_KEYS = frozenset(Reference.model_fields)
# Metrics relative to the group's baseline cell: none without it.
BASELINE_RELATIVE = frozenset({"speedup", "efficiency", "overhead", "overhead_pct", "karp_flatt"})
_IDENTITY = ("model", "scaling", "device", "strategy", "cross_device_ops", "nodes", "ranks")


class ReferenceItemError(UsageError):
    """A malformed reference item in a campaign (exit code 2)."""


def bounds(ref: Reference) -> tuple[float, float]:
    """The allowed range: value -|lower|*|value| .. value + |upper|*|value| (None: unbounded)."""
    scale = abs(ref.value)
    lo = -math.inf if ref.lower is None else ref.value - abs(ref.lower) * scale
    hi = math.inf if ref.upper is None else ref.value + abs(ref.upper) * scale
    return lo, hi


def describe(ref: Reference) -> str:
    """`metric[key=value, ...]`, how messages and the report name a check."""
    sel = ", ".join(f"{k}={v}" for k, v in ref.where.items())
    return f"{ref.metric}[{sel}]" if sel else ref.metric


@dataclass(frozen=True)
class ReferenceResult:
    """One reference checked against one matching cell (or against nothing, when it failed
    before a cell was found)."""

    reference: Reference
    measured: float | None
    passed: bool
    message: str
    cell: dict[str, Any] = field(default_factory=dict)


def parse_reference(item: Mapping[str, Any] | Reference, index: int = 0) -> Reference:
    """A campaign Reference from a mapping with the campaign's keys (a Reference is returned as
    is); errors name the item's position so the user can find it."""
    if isinstance(item, Reference):
        return item
    at = f"references[{index}]"
    if not isinstance(item, Mapping):
        raise ReferenceItemError(f"{at}: expected a mapping, got {type(item).__name__}")
    unknown = sorted(set(item) - ITEM_KEYS)
    if unknown:
        raise ReferenceItemError(
            f"{at}: unknown key(s) {', '.join(unknown)}; keys: {', '.join(sorted(ITEM_KEYS))}"
        )
    metric = item.get("metric")
    if not isinstance(metric, str) or not metric:
        raise ReferenceItemError(f"{at}.metric: a metric name is required")
    value = _number(item.get("value"), f"{at}.value", required=True)
    lower = _number(item.get("lower"), f"{at}.lower")
    upper = _number(item.get("upper"), f"{at}.upper")
    where = item.get("where") or {}
    if not isinstance(where, Mapping):
        raise ReferenceItemError(f"{at}.where: expected a mapping of column: value")
    unit = item.get("unit") or ""
    if not isinstance(unit, str):
        raise ReferenceItemError(f"{at}.unit: expected a string")
    try:
        return Reference(
            metric=metric, where=dict(where), value=value, lower=lower, upper=upper, unit=unit
        )
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ReferenceItemError(f"{at}.{loc}: {first['msg']}") from err


def check_references(
    derived: pd.DataFrame, references: Sequence[Mapping[str, Any] | Reference]
) -> list[ReferenceResult]:
    """One result per (reference, matching cell); a reference matching nothing fails once.
    Items are campaign References or mappings with the same keys."""
    results: list[ReferenceResult] = []
    for i, item in enumerate(references):
        results.extend(_check_one(derived, parse_reference(item, i)))
    return results


def all_passed(results: Sequence[ReferenceResult]) -> bool:
    return all(r.passed for r in results)


def _check_one(derived: pd.DataFrame, ref: Reference) -> list[ReferenceResult]:
    name = describe(ref)
    if ref.metric not in derived.columns:
        known = ", ".join(sorted(c for c in METRIC_UNITS if c in derived.columns))
        return [_fail(ref, f"{name}: unknown metric {ref.metric!r}; known: {known}")]
    if problem := unit_problem(ref):
        return [_fail(ref, f"{name}: {problem}")]
    mask = pd.Series(True, index=derived.index)
    for key, wanted in ref.where.items():
        if key not in derived.columns:
            return [_fail(ref, f"{name}: where key {key!r} is not a column of the results")]
        mask &= _matches(derived[key], wanted)
    cells = derived[mask]
    if cells.empty:
        return [_fail(ref, f"{name}: no results match `where`")]
    lo, hi = bounds(ref)
    unit = f" {ref.unit}" if ref.unit else ""
    out = []
    for _, row in cells.iterrows():
        cell = {k: row[k] for k in (*_IDENTITY, *swept_args(cells)) if k in row.index}
        ident = ", ".join(f"{k}={v}" for k, v in cell.items() if k not in ref.where)
        label = f"{name} ({ident})" if len(cells) > 1 and ident else name
        measured = float(row[ref.metric]) if pd.notna(row[ref.metric]) else None
        if measured is None:
            why = _why_missing(row, ref.metric)
            out.append(_fail(ref, f"FAIL {label}: no value ({why})", cell))
            continue
        passed = lo <= measured <= hi
        status = "PASS" if passed else "FAIL"
        msg = (
            f"{status} {label} = {measured:.4g}{unit}; reference {ref.value:g}{unit}, "
            f"allowed [{lo:.4g}, {hi:.4g}]"
        )
        out.append(ReferenceResult(ref, measured, passed, msg, cell))
    return out


def _why_missing(row: pd.Series, metric: str) -> str:
    """Why a matching cell has no value: its group's missing baseline, or nothing measured."""
    problem = row.get("baseline_problem")
    if metric in BASELINE_RELATIVE and isinstance(problem, str) and problem:
        return f"{metric} needs the group's baseline; {problem}"
    return "not measured"


def _fail(ref: Reference, message: str, cell: dict[str, Any] | None = None) -> ReferenceResult:
    msg = message if message.startswith("FAIL") else f"FAIL {message}"
    return ReferenceResult(ref, None, False, msg, cell or {})


def swept_args(cells: pd.DataFrame) -> list[str]:
    """The workload arguments (`args.<name>`) that differ between the matched cells: part of
    what names each of them."""
    return [c for c in arg_columns(cells.columns) if cells[c].astype(str).nunique() > 1]


def _matches(column: pd.Series, wanted: Any) -> pd.Series:
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


def _number(value: Any, at: str, required: bool = False) -> float | None:
    if value is None:
        if required:
            raise ReferenceItemError(f"{at}: a number is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReferenceItemError(f"{at}: expected a finite number, got {value!r}")
    return float(value)
