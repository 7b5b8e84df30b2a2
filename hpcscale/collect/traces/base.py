"""What a trace reader is: the file a run's trace lands in, and one summary of it.

`TraceSummary` is every summary's shape, whatever the format: totals per category in µs, the
union of communication intervals, waits, bytes, which the collector turns into the timeline
columns the analysis reads; a new format fills the same fields with the same meaning, so every
table and figure works across formats. Its second part is what a format may know or not know
beyond those totals (a class that subclasses TraceSummary inherits the defaults: a trace that
knows every category, size and wait, and says nothing more), so the collector reads plain
attributes, never asks which format it holds. hpcscale.collect.traces.summary.Summary is the
shape every reader fills; each format's reader package subclasses it.

A reader also merges a run's trace into one Chrome-trace file to look at (`merge`,
`hpcscale trace`), and a format whose trace is one file reads such a file on its own
(`summarise_file`, `hpcscale timeline FILE`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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

    # What a format may say beyond the totals; the defaults: a trace that knows every category.
    # categories the format cannot know (hpcscale.collect.traces.summary.CATEGORIES it has no
    # counterpart for, as a profiler trace has no negotiation): unknown, not 0
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

    def summarise_file(self, path: Path, *, ranks: int | None) -> TraceSummary:
        """One trace file on its own, whole, without its communication intervals (`hpcscale
        timeline FILE`); raises one of `errors` where it is not this format's. Only a format
        whose trace is one file reads one so (the default framework's: see
        hpcscale.collect.traces.file_reader)."""
        ...

    def merge(self, run_dir: Path, out: Path) -> Merged:
        """The run's trace, and its steps.json's spans where it has one, as one Chrome-trace
        file `out` (written atomically); raises MergeError saying what is missing or damaged,
        OSError where a file cannot be read or written."""
        ...


class MergeInfo(Protocol):
    """What went into a merged trace: the file, the events copied, the steps added, and
    whether a trace was cut short; a format may say more (per rank: `ranks`)."""

    out: Path

    @property
    def records(self) -> int: ...

    @property
    def steps(self) -> int: ...

    @property
    def truncated(self) -> bool: ...


@dataclass
class Merged:
    """A merge's answer: what went in, and what a user should know about it."""

    info: MergeInfo
    warnings: list[str] = field(default_factory=list)


class MergeError(Exception):
    """A run's trace cannot be merged: missing, or not its format's (the message says which,
    naming the file)."""
