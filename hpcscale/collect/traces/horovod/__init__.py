"""Streaming parser for Horovod timelines (Chrome-trace JSON written by rank 0).

Timelines reach gigabytes, so the file is read in fixed-size binary chunks of whole records
(`records`); each chunk's records are paired B with E by one of two engines (`compiled_engine`,
the C scanner, or `python_engine`, msgspec and a Python loop), and the pairs are folded into
running totals by the NumPy code both share (`folding`, with `streaming_union` for the unions
and `classify` for what names mean); completed intervals are unioned chunk by chunk, keeping
memory flat. `parse` picks the engine and returns a `summary.TimelineSummary`.

Dependencies run one way: parse -> engines -> folding -> streaming_union, summary, classify;
engines and parse -> records. Nothing in the package imports this module.
"""

from hpcscale.collect.traces.horovod.classify import CATEGORIES, category_of, tensor_bytes
from hpcscale.collect.traces.horovod.parse import fast_engine_available, parse_timeline
from hpcscale.collect.traces.horovod.records import (
    TimelineError,
    iter_chunks,
    iter_events,
    iter_raw_records,
    read_start_time,
)
from hpcscale.collect.traces.horovod.summary import NO_COLLECTIVES, TensorStat, TimelineSummary

__all__ = [
    "CATEGORIES",
    "NO_COLLECTIVES",
    "TensorStat",
    "TimelineError",
    "TimelineSummary",
    "category_of",
    "fast_engine_available",
    "iter_chunks",
    "iter_events",
    "iter_raw_records",
    "parse_timeline",
    "read_start_time",
    "tensor_bytes",
]
