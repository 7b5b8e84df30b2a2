"""Which figure a campaign's scaling tables stand on: a value of the ground, decided by the
campaign (a bundled program's images/s, or the figure a command workload names as
`workload.throughput` or `workload.time`), so that collect, analysis and report read it without
importing each other. Pure: no pandas (hpcscale.analysis.metric has the frame helpers).

The metric travels as a name: a command's figure stays in its own column (`samples_per_s`,
`tokens_per_s`, a `time:` metric's name), and analysis keys on `throughput_column` and
`time_column` (`<column>_lo`, `base_<column>`, ...), with the tables' headings and the figures'
axes taken from `heading` and `axis_label` when they are built. It travels in `TableContext`,
never in the frame's `attrs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

THROUGHPUT = "throughput"
TIME = "time"
# The bundled programs' columns, by kind: images/s and the mean epoch time.
IMAGES_PER_S = "images_per_s"
EPOCH_TIME_S = "epoch_time_s"
COLUMN_OF_KIND = {THROUGHPUT: IMAGES_PER_S, TIME: EPOCH_TIME_S}
KINDS = tuple(COLUMN_OF_KIND)
# How the tables name those columns when they hold their usual figure.
HEADING_OF_KIND = {THROUGHPUT: "Images/s", TIME: "Epoch time"}
# How a figure's axis names them (vocab's headings of the two columns).
AXIS_OF_KIND = {THROUGHPUT: "Throughput (images/s)", TIME: "Epoch time (s)"}


@dataclass(frozen=True)
class ScalingMetric:
    """The figure the scaling tables, speedup, efficiency, compare and extrapolation use."""

    name: str = IMAGES_PER_S
    unit: str = "images/s"
    kind: str = THROUGHPUT  # THROUGHPUT or TIME
    # read from a command's output (even when it is images/s): the report says so. Not part of
    # equality: two campaigns on images/s compare alike whoever measured it.
    command: bool = field(default=False, compare=False)

    @property
    def column(self) -> str:
        """The table column that holds it: its own name."""
        return self.name

    @property
    def throughput_column(self) -> str:
        """The throughput the tables show and weak scaling divides: the metric itself, or
        images/s beside a `time:` metric (what the program printed of it, if anything)."""
        return self.name if self.kind == THROUGHPUT else IMAGES_PER_S

    @property
    def time_column(self) -> str:
        """The time strong scaling divides: the metric itself, or the epoch time beside a
        throughput."""
        return self.name if self.kind == TIME else EPOCH_TIME_S

    @property
    def usual(self) -> bool:
        """It is the bundled programs' own figure (images/s, or the epoch time in s)."""
        return self.name == COLUMN_OF_KIND[self.kind] and self.unit in ("images/s", "s", "")

    @property
    def heading(self) -> str:
        """How a table names it: `samples_per_s (samples/s)`, `Images/s` when usual."""
        if self.usual:
            return HEADING_OF_KIND[self.kind]
        return f"{self.name} ({self.unit})" if self.unit and self.kind == THROUGHPUT else self.name

    @property
    def axis_label(self) -> str:
        """How a figure's axis (or a table's column with its unit) names it: `Throughput
        (images/s)` when usual; a `time:` metric in the unit its extractor declares."""
        if self.usual:
            return AXIS_OF_KIND[self.kind]
        if self.kind == TIME:
            return f"{self.name} ({self.unit or 's'})"
        return self.heading

    @property
    def throughput_heading(self) -> str:
        """A table's throughput column: the metric's heading, or `Images/s` beside a time."""
        return self.heading if self.kind == THROUGHPUT else HEADING_OF_KIND[THROUGHPUT]

    @property
    def throughput_axis(self) -> str:
        """A figure's throughput axis: the metric's label, or `Throughput (images/s)`."""
        return self.axis_label if self.kind == THROUGHPUT else AXIS_OF_KIND[THROUGHPUT]

    @property
    def time_name(self) -> str:
        """What a time column holds, without its unit: `Epoch time`, or a `time:` metric's name."""
        return self.heading if self.kind == TIME else HEADING_OF_KIND[TIME]

    @property
    def time_heading(self) -> str:
        """A table's time column or a figure's time axis, with its unit: `Epoch time (s)`, or a
        `time:` metric's `step_ms (ms)`."""
        return self.axis_label if self.kind == TIME else AXIS_OF_KIND[TIME]

    def axis_of(self, column: str) -> str | None:
        """A figure's axis for `column`: the metric's throughput or time label when it is one
        of its columns, else None (the vocabulary's heading)."""
        if column == self.throughput_column:
            return self.throughput_axis
        if column == self.time_column:
            return self.time_heading
        return None

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


def nature_of(name: str, unit: str) -> str | None:
    """THROUGHPUT for a rate (a unit per second, a `*_per_s` name), TIME for a duration,
    None when neither says (speedup would be inverted on the wrong one: X_N/X_1 vs T_1/T_N)."""
    u = unit.strip().lower()
    if "/" in u or name.endswith("_per_s"):
        return THROUGHPUT
    if u in ("s", "ms", "us", "min", "h", "seconds") or name.endswith(("_s", "_ms", "_time")):
        return TIME
    return None


BUNDLED_METRIC = ScalingMetric()  # what a bundled program's tables stand on


def metric_of(metric: ScalingMetric | str | None) -> ScalingMetric:
    """A ScalingMetric from a metric, a throughput column's name, or None (images/s)."""
    if metric is None:
        return BUNDLED_METRIC
    if isinstance(metric, str):
        return BUNDLED_METRIC if metric == IMAGES_PER_S else ScalingMetric(metric, "")
    return metric
