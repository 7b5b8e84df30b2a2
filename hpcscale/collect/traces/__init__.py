"""Trace readers: a run's own record of where its time went (one package per format, each
registered with the label the report gives it), read into one summary shape that the collector
turns into the timeline columns. A trace format is one package here and one line in
hpcscale.model.registry.TRACE_READERS; a framework names the format its runs write
(`Framework.trace`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcscale.frameworks import for_cell
from hpcscale.model.registry import DEFAULT_STRATEGY, TRACE_READERS, load

if TYPE_CHECKING:
    from hpcscale.collect.traces.base import TraceReader


def reader(name: str) -> TraceReader:
    """The trace reader registered under `name` (imported on first use)."""
    return load(TRACE_READERS[name].where)()  # type: ignore[no-any-return]


def reader_for(strategy: str, command: bool) -> TraceReader | None:
    """The reader of the format a run's framework writes (a user's command: the framework its
    strategy names); None for a framework that writes no trace."""
    name = for_cell(strategy, command).trace
    return None if name is None else reader(name)


def file_format() -> str:
    """The format of one trace file read on its own (`hpcscale timeline FILE`): the default
    framework's, whose trace is one file (a TRACE_READERS name; its reader not imported)."""
    name = for_cell(DEFAULT_STRATEGY, command=False).trace
    assert name is not None, "the default framework writes a trace"
    return name


def file_reader() -> TraceReader:
    """The reader of one trace file on its own (see file_format)."""
    return reader(file_format())


def reader_in(run_dir: Path) -> TraceReader:
    """The reader of the first registered format whose trace `run_dir` holds, where the run's
    framework cannot be read (no run.json); none there: the first registered, whose missing
    file is then what the caller reports."""
    readers = [reader(name) for name in TRACE_READERS]
    return next((r for r in readers if r.path(run_dir).exists()), readers[0])
