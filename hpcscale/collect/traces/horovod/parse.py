"""`parse_timeline`: choose an engine, fold the file, judge what was read.

The engines only fold records; whether an unreadable file is an error (not a timeline) or a
killed run's cut file is decided here, once for both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from hpcscale.collect.traces.horovod import python_engine
from hpcscale.collect.traces.horovod.folding import SpanFolder
from hpcscale.collect.traces.horovod.records import CHUNK_SIZE, TimelineError
from hpcscale.collect.traces.horovod.summary import TimelineSummary

Engine = Literal["auto", "c", "python"]


def fast_engine_available() -> bool:
    """Whether the compiled scanner was built (it needs a C compiler at install time)."""
    try:
        from hpcscale.collect.traces.horovod import _scan  # noqa: F401
    except ImportError:
        return False
    return True


def parse_timeline(
    path: str | os.PathLike[str],
    *,
    ranks: int | None = None,
    keep_comm: bool = True,
    window_unix_us: tuple[int, int] | None = None,
    chunk_size: int = CHUNK_SIZE,
    engine: Engine = "auto",
) -> TimelineSummary:
    """Summarise one timeline file in one streaming pass (memory independent of file size).

    `ranks` overrides the rank count inferred from readiness ticks (used for bus bandwidth).
    `keep_comm` keeps the merged communication intervals (for the exact compute/comm split).
    `window_unix_us` (Unix-epoch µs, e.g. the timed epochs from steps.json) clips every span to
    that window and drops ops outside it; it needs pid 0's start time (`window_applied`).
    `engine`: "c" is the compiled scanner (hpcscale.collect.traces.horovod._scan), "python"
    the msgspec path it must agree with; "auto" takes the compiled one when it was built.
    Raises TimelineError when the file is not a Horovod timeline, OSError when unreadable."""
    p = Path(path)
    size = p.stat().st_size
    st: dict[str, Any] = {}
    if engine == "auto":
        engine = "c" if fast_engine_available() else "python"
    folder: SpanFolder
    if engine == "c":
        # Imported here: the module needs the extension, which may not have been built.
        from hpcscale.collect.traces.horovod import compiled_engine

        folder = compiled_engine.fold_file(p, chunk_size, st, keep_comm, window_unix_us)
    else:
        folder = python_engine.fold_file(p, chunk_size, st, keep_comm, window_unix_us)
    summary = folder.summary(str(p), size, st)
    # A killed job can leave one cut record and nothing else; anything else is not ours.
    unreadable = st["bad_records"] or (st["truncated"] and not st.get("cut_record"))
    if summary.events == 0 and summary.metadata == 0 and unreadable:
        raise TimelineError("no parseable Horovod timeline record")
    if ranks is not None:
        summary.ranks = ranks
    return summary
