"""PyTorch profiler (Kineto Chrome-trace JSON) traces: one per rank, read into the summary every
trace reader fills (hpcscale.collect.traces.base), so every table and figure works for DDP runs
too.

Layout in a run directory (what whoever starts the profiler must write):

    RUN_DIR/traces/rank<r>.json        r = the global rank (torch.distributed.get_rank())
    RUN_DIR/traces/rank<r>.json.gz     the same, gzip (torch writes it for a `.gz` name)
    RUN_DIR/traces/rank<r>.json.tmp    a file still being written (a killed job's): read as
                                       far as it goes and flagged truncated; a finished
                                       rank<r>.json[.gz] beside it wins

e.g. `torch.profiler.profile(schedule=..., on_trace_ready=lambda p:
p.export_chrome_trace(f"{run_dir}/traces/rank{rank}.json"))`. The rank is taken from the
trace's own `distributedInfo.rank` where it says one, else from the file name. Only the last
window's trace is kept per rank (a second export overwrites the first). A rank with two files
keeps one (the finished one, else the first by name) and files of ranks outside the run's world
(an earlier, larger attempt's) are left out: both said in the summary's `notes` (reader.py says
what else is said there, and what is left out rather than guessed).

Modules, one way: reader (TraceReader, summary) -> perfetto (every rank's trace merged into one
file), waits (cross-rank match), measure (compute time against small sets) -> rank (one file's
events folded into intervals) -> stream (bounded-memory event decoding); files (which file is
which rank) under reader and perfetto. Memory: one 1 MB piece of a file, one rank's busy time at a
time (plus the lowest rank's, for its steps), and every rank's few collectives and steps.
Nothing here imports torch.
"""

from hpcscale.collect.traces.torch.files import TRACE_DIR
from hpcscale.collect.traces.torch.reader import (
    TorchProfilerTrace,
    TorchTraceSummary,
    summarise,
)
from hpcscale.collect.traces.torch.stream import TraceError

__all__ = ["TRACE_DIR", "TorchProfilerTrace", "TorchTraceSummary", "TraceError", "summarise"]
