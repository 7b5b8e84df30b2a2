"""What a trace reader is: the file a run's trace lands in, and one summary of it.

`TraceSummary` is every summary's shape, whatever the format: totals per category in µs, the
union of communication intervals, waits, bytes, which the collector turns into the timeline
columns the analysis reads; a new format fills the same fields with the same meaning, so every
table and figure works across formats. Its second part is what a format may know or not know
beyond a Horovod timeline (a class that subclasses TraceSummary inherits the defaults: a trace
that says nothing more), so the collector reads plain attributes, never asks which format it
holds. hpcscale.collect.traces.horovod.summary.TimelineSummary is the worked example."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from hpcscale.collect import intervals as iv

# What a trace with no collective at all says, whatever its format (a 1-rank run)
NO_COLLECTIVES = "no collectives recorded"


class TraceSummary(Protocol):
    """One trace's figures as the collector reads them (times in µs)."""

    events: int
    truncated: bool  # the file ends in a cut record (a killed job's)
    start_time_since_epoch_us: int | None  # the Unix time of the trace's time axis' 0
    first_ts_us: int | None
    last_ts_us: int | None
    window_us: tuple[int, int] | None  # the timed window on the trace's axis, where placed
    waits_us: int
    waits_in_comm_us: int
    allreduce_bytes: int
    comm_intervals: iv.Intervals  # the union of the collectives on the trace's axis

    # What a format may say beyond a Horovod timeline; the defaults are a Horovod timeline's.
    # categories the format cannot know (Horovod's own, in a profiler trace): unknown, not 0
    UNKNOWN_CATEGORIES: ClassVar[tuple[str, ...]] = ()
    # the step markers' figures (a profiler trace's ProfilerSteps, dicts of µs), [] for a
    # trace of steps without markers; None: a format without steps (it covers the whole run)
    steps: list[dict[str, Any]] | None = None
    notes: Sequence[str] = ()  # what the reader left out or could not place, for the row
    figures_rank: int = 0  # whose trace the figures are (not rank 0's: no exact split)
    bytes_known: bool = True  # False: some allreduce had no size (no bytes, no bandwidth)
    waits_known: bool = True  # False: the waits are placeholders, `waits_unknown_why` says why
    waits_unknown_why: str = ""

    @property
    def empty(self) -> bool:
        """No events at all."""
        ...

    @property
    def span_us(self) -> int:
        """From the first time stamp to the last (0 without them)."""
        ...

    def seconds(self, category: str) -> float:
        """A category's total, s."""
        ...

    def bus_bandwidth_gbs(self) -> float | None:
        """The allreduces' bus bandwidth, GB/s; None where it cannot be told."""
        ...

    def straggler(self) -> tuple[int, int, int] | None:
        """(rank, times last ready, negotiations), or None."""
        ...


class TraceReader(Protocol):
    name: ClassVar[str]  # its registry name (hpcscale.model.registry.TRACE_READERS)
    label: ClassVar[str]  # where figures came from, as the report says it (its registry line's)
    file_name: ClassVar[str]  # the trace in a run directory, as notes name it
    errors: ClassVar[tuple[type[Exception], ...]]  # what `summarise` raises on a damaged file

    def path(self, run_dir: Path) -> Path:
        """Where the run's trace is (it may not exist)."""
        ...

    def summarise(
        self, path: Path, *, ranks: int | None, window_unix_us: tuple[int, int] | None
    ) -> TraceSummary:
        """The trace's totals, clipped to the timed window when one is given."""
        ...
