"""The Horovod timeline as a trace reader (hpcscale.collect.traces.base.TraceReader)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from hpcscale.collect.traces.horovod.parse import parse_timeline
from hpcscale.collect.traces.horovod.records import TimelineError
from hpcscale.collect.traces.horovod.summary import TimelineSummary
from hpcscale.model.registry import TRACE_READERS


class HorovodTimeline:
    """timeline.json, written by rank 0 (HOROVOD_TIMELINE), one streaming pass."""

    name: ClassVar[str] = "horovod"
    label: ClassVar[str] = TRACE_READERS[name].label
    file_name: ClassVar[str] = "timeline.json"
    errors: ClassVar[tuple[type[Exception], ...]] = (TimelineError, OSError)

    def path(self, run_dir: Path) -> Path:
        return run_dir / self.file_name

    def summarise(
        self, path: Path, *, ranks: int | None, window_unix_us: tuple[int, int] | None
    ) -> TimelineSummary:
        return parse_timeline(path, ranks=ranks, window_unix_us=window_unix_us)
