"""What a trace reader is: the file a run's trace lands in, and one summary of it.

The summary is hpcscale.collect.traces.horovod.summary.TimelineSummary's shape (totals per
category in µs, the union of communication intervals, waits, bytes), which the collector turns
into the timeline columns the analysis reads; a new format fills the same fields with the same
meaning, so every table and figure works across formats."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from hpcscale.collect.traces.horovod.summary import TimelineSummary


class TraceReader(Protocol):
    name: ClassVar[str]  # its registry name (hpcscale.model.registry.TRACE_READERS)
    label: ClassVar[str]  # where figures came from, as the report says it ("Horovod timeline")
    file_name: ClassVar[str]  # the trace in a run directory, as notes name it
    errors: ClassVar[tuple[type[Exception], ...]]  # what `summarise` raises on a damaged file

    def path(self, run_dir: Path) -> Path:
        """Where the run's trace is (it may not exist)."""
        ...

    def summarise(
        self, path: Path, *, ranks: int | None, window_unix_us: tuple[int, int] | None
    ) -> TimelineSummary:
        """The trace's totals, clipped to the timed window when one is given."""
        ...
