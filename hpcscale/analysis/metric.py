"""Which figure a campaign's scaling tables stand on, and the extra metrics a command reads.

A bundled program's tables use images/s. A command workload names its own figure
(`workload.throughput`, any unit: samples/s, tokens/s; or `workload.time` for strong scaling);
the collector copies it into the table's throughput (`images_per_s`) or time (`epoch_time_s`)
column so every analysis works unchanged, and this records what that column then holds, so the
report labels it by the metric's name and unit. It travels in `TableContext`, never in the
frame's `attrs`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

THROUGHPUT = "throughput"
TIME = "time"
# The table columns a chosen figure is copied into, by kind (collect.readers.command_row).
COLUMN_OF_KIND = {THROUGHPUT: "images_per_s", TIME: "epoch_time_s"}
# How the tables name those columns when they hold their usual figure.
HEADING_OF_KIND = {THROUGHPUT: "Images/s", TIME: "Epoch time"}


@dataclass(frozen=True)
class ScalingMetric:
    """The figure the scaling tables, speedup, efficiency, compare and extrapolation use."""

    name: str = "images_per_s"
    unit: str = "images/s"
    kind: str = THROUGHPUT  # THROUGHPUT or TIME
    # read from a command's output (even when it is images/s): the report says so. Not part of
    # equality: two campaigns on images/s compare alike whoever measured it.
    command: bool = field(default=False, compare=False)

    @property
    def column(self) -> str:
        """The table column that holds it."""
        return COLUMN_OF_KIND[self.kind]

    @property
    def usual(self) -> bool:
        """It is the column's own figure: nothing to relabel."""
        return self.name == self.column and self.unit in ("images/s", "s", "")

    @property
    def heading(self) -> str:
        """How a table names it: `samples_per_s (samples/s)`, `Images/s` when usual."""
        if self.usual:
            return HEADING_OF_KIND[self.kind]
        return f"{self.name} ({self.unit})" if self.unit and self.kind == THROUGHPUT else self.name

    @classmethod
    def of_rows(cls, rows: Iterable[Mapping[str, Any]]) -> ScalingMetric:
        """The metric a campaign's rows were collected on: the first command run's
        (`figure_metric`, `figure_unit`, `figure_kind`), else images/s."""
        for row in rows:
            name = row.get("figure_metric")
            if isinstance(name, str) and name:
                unit = row.get("figure_unit")
                kind = row.get("figure_kind")
                return cls(
                    name,
                    unit if isinstance(unit, str) else "",
                    kind if kind in COLUMN_OF_KIND else THROUGHPUT,
                    command=True,
                )
        return cls()


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
    own = command_rows(runs) & runs["figure_kind"].isin(list(COLUMN_OF_KIND))
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


def compared_on(cells: pd.DataFrame) -> tuple[str, bool]:
    """The column cells are compared and drawn on, and whether higher is better: a `time:`
    campaign's time (its `images_per_s` is empty), else the throughput."""
    on = cells.get("scaled_on")
    if on is not None and len(cells) and bool((on == TIME).all()):
        return COLUMN_OF_KIND[TIME], False
    return COLUMN_OF_KIND[THROUGHPUT], True


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
