"""Which figure a campaign's scaling tables stand on: a value of the ground, decided by the
campaign (a bundled program's images/s, or the figure a command workload names as
`workload.throughput` or `workload.time`), so that collect, analysis and report read it without
importing each other. Pure: no pandas (hpcscale.analysis.metric has the frame helpers).

The collector copies a command's figure into the table's throughput (`images_per_s`) or time
(`epoch_time_s`) column so every analysis works unchanged; this records what that column then
holds, so the report labels it by the metric's name and unit. It travels in `TableContext`,
never in the frame's `attrs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
