"""The Horovod timeline as a trace reader (hpcscale.collect.traces.base.TraceReader)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from hpcscale.collect.split import load_steps
from hpcscale.collect.traces.base import Merged, MergeError
from hpcscale.collect.traces.horovod.parse import parse_timeline
from hpcscale.collect.traces.horovod.perfetto import write_trace
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

    def summarise_file(self, path: Path, *, ranks: int | None) -> TimelineSummary:
        return parse_timeline(path, ranks=ranks, keep_comm=False)

    def merge(self, run_dir: Path, out: Path) -> Merged:
        """The timeline's records as they are, with steps.json's spans mapped onto its axis
        (hpcscale.collect.traces.horovod.perfetto)."""
        tl = self.path(run_dir)
        if not tl.is_file():
            raise MergeError(
                f"{run_dir}: no {self.file_name} (was the run made with timeline: true?)"
            )
        warnings = []
        steps = None
        if (run_dir / "steps.json").is_file():
            steps = load_steps(run_dir / "steps.json")
        else:
            warnings.append(f"{run_dir}: no steps.json, writing the timeline only")
        try:
            info = write_trace(tl, steps, out)
        except (TimelineError, ValueError) as exc:
            raise MergeError(str(exc)) from exc
        return Merged(info, warnings)
