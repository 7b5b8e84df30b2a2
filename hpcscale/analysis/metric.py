"""The frame side of a campaign's scaling metric (hpcscale.model.scaling_metric.ScalingMetric):
which rows are a command's, the extra metrics it read, and what each cell's speedup and
comparison stand on."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import pandas as pd

from hpcscale.model.errors import UsageError
from hpcscale.model.scaling_metric import (
    KINDS,
    THROUGHPUT,
    TIME,
    ScalingMetric,
    metric_of,
    nature_of,
)


def frame_metric(frame: pd.DataFrame) -> ScalingMetric:
    """The scaling metric a run table's rows were collected on, as they say it (the first
    command row's `figure_metric`, `figure_unit`, `figure_kind`: ScalingMetric.of_rows), else
    images/s: what analysis keys on when the caller names none (a notebook's own table)."""
    if "figure_metric" not in frame.columns:
        return metric_of(None)
    named = frame["figure_metric"].map(lambda v: isinstance(v, str) and bool(v))
    if not named.any():
        return metric_of(None)
    names = sorted(set(frame.loc[named, "figure_metric"]))
    bundled = ~named & ~command_rows(frame)  # a bundled program's rows name no metric
    if len(names) > 1 or bundled.any():
        # one metric for all would leave the others' speedups empty, or judge them on the
        # wrong definition, without a word: derive each campaign on its own instead
        said = [*names, *(["a bundled program's images/s"] if bundled.any() else [])]
        raise UsageError(
            f"these rows were collected on different scaling metrics ({', '.join(said)}): "
            "analyse each campaign's rows on their own, or name the metric to use"
        )
    return _metric_of_rows(frame, named)


def chosen_metric(metric: ScalingMetric | str | None, frame: pd.DataFrame) -> ScalingMetric:
    """The metric a caller named (a ScalingMetric, or a column's name: its unit and kind as the
    rows that name it say, else from the name, a time for `*_s`/`*_ms`/`*_time`: a time taken
    for a rate inverts the speedup), or the rows' own (`frame_metric`) when none is named."""
    if metric is None:
        return frame_metric(frame)
    if not isinstance(metric, str):
        return metric
    if "figure_metric" in frame.columns:
        mine = frame["figure_metric"] == metric
        if mine.any():
            return _metric_of_rows(frame, mine)
    named = metric_of(metric)
    if named is not metric_of(None) and nature_of(metric, "") == TIME:
        return ScalingMetric(metric, "", TIME)
    return named


def _metric_of_rows(frame: pd.DataFrame, rows: pd.Series) -> ScalingMetric:
    """The metric the first of `rows` names (its figure_metric, figure_unit, figure_kind)."""
    cols = [c for c in ("figure_metric", "figure_unit", "figure_kind") if c in frame.columns]
    return ScalingMetric.of_rows(frame.loc[rows, cols].head(1).to_dict("records"))


def command_rows(frame: pd.DataFrame) -> pd.Series:
    """True for the rows (runs or cells) of a command workload: they carry its command."""
    if "command" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["command"].notna()


def extra_metrics(runs: pd.DataFrame, known: Iterable[str] = ()) -> list[str]:
    """The numeric (not series) metrics a command workload extracted beyond the table's known
    columns: folded over repeats like the others, so references can check them."""
    if "metric_units" not in runs.columns:
        return []
    names: dict[str, None] = {}
    for units in runs["metric_units"].dropna():
        try:
            names.update(dict.fromkeys(json.loads(units)))
        except (TypeError, ValueError):
            continue
    skip = set(known)
    return [n for n in names if n in runs.columns and n not in skip and _scalar(runs[n])]


def _scalar(column: pd.Series) -> bool:
    values = column.dropna()
    return bool(len(values)) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))
        for v in values
    )


# A cell's `scaled_on` (derive.derive): the kind its program declared, or this for a bundled
# program, whose strong scaling stands on epoch time (throughput without a time) as the seeds'.
BUNDLED = ""


def declared_kinds(runs: pd.DataFrame) -> dict[str, str]:
    """run id -> the kind (THROUGHPUT or TIME) of the metric a command run declared
    (`figure_kind`); bundled runs are absent (their speedup keeps the seeds' definitions)."""
    if "figure_kind" not in runs.columns or "run_id" not in runs.columns:
        return {}
    own = command_rows(runs) & runs["figure_kind"].isin(list(KINDS))
    return dict(zip(runs.loc[own, "run_id"].map(str), runs.loc[own, "figure_kind"], strict=True))


def scaled_on(cells: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Per cell (with `run_ids`): the kind its runs declared, BUNDLED for a bundled program's."""
    kinds = declared_kinds(runs)
    return [
        next((kinds[str(r)] for r in ids if str(r) in kinds), BUNDLED)
        if isinstance(ids, list | tuple)
        else BUNDLED
        for ids in cells.get("run_ids", pd.Series([()] * len(cells), index=cells.index))
    ]


def compared_on(cells: pd.DataFrame, metric: ScalingMetric | str | None = None) -> tuple[str, bool]:
    """The column cells are compared and drawn on, and whether higher is better: a `time:`
    campaign's time (it has no throughput), else the throughput (`metric`'s columns)."""
    metric = metric_of(metric)
    on = cells.get("scaled_on")
    if on is not None and len(cells) and bool((on == TIME).all()):
        return metric.time_column, False
    return metric.throughput_column, True


def strong_rule(cells: pd.DataFrame) -> str:
    """How the report says strong scaling was judged, from what the cells' speedups stand on
    (`speedup_on`, add_scaling_metrics): one sentence per definition in use."""
    strong = cells[cells["scaling"] == "strong"] if "scaling" in cells.columns else cells
    on = set(strong.get("speedup_on", pd.Series(dtype=object)).dropna())
    declared = set(strong.get("scaled_on", pd.Series(dtype=object)).dropna()) - {BUNDLED}
    said = []
    if TIME in on:
        said.append(
            "Strong scaling is judged on time: speedup = T₁ / T_N, efficiency = T₁ / (N·T_N)"
            + (" (your program's declared `time:` metric)." if TIME in declared else ".")
        )
    if THROUGHPUT in on:
        said.append(
            "Strong scaling is judged on throughput: speedup = X_N / X₁, efficiency = "
            "X_N / (N·X₁)"
            + (
                " (the metric your program declared as `throughput:`, not its epoch time)."
                if THROUGHPUT in declared
                else " (no time was measured)."
            )
        )
    return " ".join(said) or "Strong scaling is judged on time: efficiency = T₁ / (N·T_N)."
