"""Trace readers: a run's own record of where its time went (a Horovod timeline today, PyTorch
profiler traces next), read into one summary shape that the collector turns into the timeline
columns. A trace format is one package here and one line in
hpcscale.model.registry.TRACE_READERS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcscale.model.registry import TRACE_READERS, load

if TYPE_CHECKING:
    from hpcscale.collect.traces.base import TraceReader

DEFAULT = "horovod"  # the bundled TF programs and a horovodrun-launched command write this


def reader(name: str) -> TraceReader:
    """The trace reader registered under `name` (imported on first use)."""
    return load(TRACE_READERS[name])()  # type: ignore[no-any-return]


def reader_for(row: dict[str, Any]) -> TraceReader:
    """Which reader reads a run's traces: the one its row names (`trace_format`), else the
    Horovod timeline, the only format the runs collected so far write."""
    return reader(str(row.get("trace_format") or DEFAULT))
