"""Parameters per model, as seed 001 lists them (generator, discriminator, total): how big each
network is explains why a small GAN stops scaling where a VGG would not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

TOTAL = "Total"
TRAINABLE = "Trainable (all networks)"
RUNS = "Runs"


def network_counts(value: Any) -> dict[str, int]:
    """{network: total parameters} from a run's `params` (a dict; Parquet gives missing names
    back as None); {} when the run recorded none."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(v) for k, v in value.items() if v is not None and np.isfinite(float(v))}


def param_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model and distinct set of counts (a model built at two image sizes has two):
    Model, one column per network (first-seen order, e.g. Generator, Discriminator), Total (their
    sum: trainable and frozen), Trainable (metrics.json `param_count`, when it is no larger) and
    Runs. Empty when no run recorded parameters."""
    if runs.empty or "model" not in runs.columns:
        return pd.DataFrame()
    nets: list[str] = []
    rows: dict[tuple, dict[str, Any]] = {}
    models = runs["model"].to_numpy(object)
    params = _column(runs, "params")
    param_counts = _column(runs, "param_count")
    for model, value, count in zip(models, params, param_counts, strict=True):
        counts = network_counts(value)
        trainable = _count(count)
        if not counts and trainable is None:
            continue
        nets += [n for n in counts if n not in nets]
        total = sum(counts.values()) if counts else None
        if total is not None and trainable is not None and trainable > total:
            trainable = None  # not a trainable count of these networks: do not show it
        key = (str(model), tuple(sorted(counts.items())), trainable)
        row = rows.setdefault(
            key,
            {"Model": key[0], **counts, TOTAL: _nan(total), TRAINABLE: _nan(trainable)},
        )
        row[RUNS] = row.get(RUNS, 0) + 1
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(list(rows.values()))
    frame = frame.rename(columns={n: n.capitalize() for n in nets})
    cols = ["Model", *[n.capitalize() for n in nets], TOTAL, TRAINABLE, RUNS]
    frame = frame[cols].sort_values(["Model", TOTAL], kind="stable").reset_index(drop=True)
    for col in cols[1:]:
        frame[col] = frame[col].astype("Int64") if frame[col].notna().all() else frame[col]
    return frame


def _column(runs: pd.DataFrame, name: str) -> list[Any]:
    """A column's values as a list (None for every run when the table has no such column):
    read per value, never a Series per run (a 1,000-run sweep built 1,000 of them)."""
    return runs[name].tolist() if name in runs.columns else [None] * len(runs)


def _count(value: Any) -> int | None:
    if isinstance(value, bool | int | np.integer):  # the usual case, without a Series
        return int(value)
    if isinstance(value, float | np.floating) and not np.isnan(value):
        return int(value)
    number = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    return None if pd.isna(number) else int(number)


def _nan(value: int | None) -> float | int:
    return np.nan if value is None else value
