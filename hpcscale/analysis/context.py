"""What travels beside a campaign's tidy run table: the runs it planned, the runs the collector
could not (fully) read, those not finished yet or no longer in the matrix, and the report's
choices about them.

It used to ride in `DataFrame.attrs`, which pandas deep-copies into every frame and row it
derives (each `iterrows`, `apply`, `copy`, slice): with 1,000 planned runs in attrs every row of
every loop copied 1,000 dicts, and a 1,000-run report never finished. Kept here, beside the
table, it is passed only where it is read (the baseline, the quality checks and section, the
report's notes, compare's missing cells).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from hpcscale.analysis.frame import normalise
from hpcscale.model.scaling_metric import ScalingMetric


@dataclass(frozen=True)
class TableContext:
    """A campaign's run table's companions (collect.collector.Collected.context builds one;
    a notebook's own table has the empty default: nothing planned beyond its rows)."""

    # run fields (run.json) of every run the campaign planned, finished or not: which cell is
    # each group's baseline does not depend on which runs happened to finish
    planned: tuple[Mapping[str, Any], ...] = ()
    problems: tuple[tuple[str, str], ...] = ()  # (run id, reason): read in part, or not at all
    unreadable: tuple[tuple[str, str], ...] = ()  # finished, results unreadable: no row
    unfinished: tuple[str, ...] = ()  # planned, no metrics.json yet
    # (run id, state, reason): runs whose last known state is not COMPLETED (FAILED, ...):
    # never measurements, whatever they printed (their rows are in results.parquet, `state`)
    not_completed: tuple[tuple[str, str, str], ...] = ()
    stale: tuple[str, ...] = ()  # no longer in the campaign's matrix
    stale_included: bool = False  # stale runs are in the table (--include-stale)
    include_partial: bool = False  # truncated timelines' per-epoch figures kept
    # what the throughput (or time) column holds: a command's own metric, named with its unit
    metric: ScalingMetric = field(default_factory=ScalingMetric)

    @classmethod
    def of(
        cls,
        planned: Iterable[Mapping[str, Any]] = (),
        problems: Iterable[tuple[str, str]] = (),
        unreadable: Iterable[tuple[str, str]] = (),
        unfinished: Iterable[str] = (),
        stale: Iterable[str] = (),
        stale_included: bool = False,
        include_partial: bool = False,
        metric: ScalingMetric | None = None,
        not_completed: Iterable[tuple[str, str, str]] = (),
    ) -> TableContext:
        """Built from any iterables (lists from the collector)."""
        return cls(
            tuple(planned),
            tuple((str(r), str(w)) for r, w in problems),
            tuple((str(r), str(w)) for r, w in unreadable),
            tuple(map(str, unfinished)),
            tuple((str(r), str(s), str(w)) for r, s, w in not_completed),
            tuple(map(str, stale)),
            bool(stale_included),
            bool(include_partial),
            metric or ScalingMetric(),
        )

    @cached_property
    def planned_frame(self) -> pd.DataFrame | None:
        """The planned runs as a `frame.normalise`d table (None when nothing was planned), built
        once: the baseline, the checks and compare all read it."""
        return normalise(pd.DataFrame(list(self.planned))) if self.planned else None

    @cached_property
    def planned_by_id(self) -> dict[str, Mapping[str, Any]]:
        """Planned run fields by run id (the Data quality section names a row-less run's cell)."""
        return {str(p.get("run_id")): p for p in self.planned}
