"""Where a run's profiler traces are: RUN_DIR/traces/rank<r>.json[.gz] (a `.tmp` while being
written), which file stands for which rank, and the notes on files left out; read by both the
summary (`reader`) and the merge (`perfetto`)."""

from __future__ import annotations

import re
from pathlib import Path

TRACE_DIR = "traces"
FILE = re.compile(r"rank(\d+)\.json(\.gz)?(\.tmp)?$")
# Kineto's ts before baseTimeNanoseconds existed were Unix µs: anything past 2001 is one
UNIX_US = 10**15


def rank_files(trace_dir: Path) -> dict[int, tuple[Path, bool]]:
    """rank -> (its file, whether only a `.tmp` of it exists); a finished file beats a .tmp."""
    return trace_files(trace_dir)[0]


def _prefer(p: Path) -> tuple[bool, str]:
    """The order a rank's files are preferred in: finished first, then by name."""
    return p.name.endswith(".tmp"), p.name


def trace_files(
    trace_dir: Path, ranks: int | None = None
) -> tuple[dict[int, tuple[Path, bool]], list[str]]:
    """rank -> (its file, whether it is a `.tmp`), by file name, and notes on the files left
    out: a rank's other files (the finished one wins, else the first by name) and files of
    ranks outside `ranks` (an earlier, larger attempt's)."""
    found: dict[int, list[Path]] = {}
    for p in sorted(trace_dir.iterdir()):
        m = FILE.match(p.name)
        if m and p.is_file():
            found.setdefault(int(m.group(1)), []).append(p)
    out: dict[int, tuple[Path, bool]] = {}
    notes: list[str] = []
    for r, paths in sorted(found.items()):
        if ranks is not None and r >= ranks:
            names = ", ".join(p.name for p in paths)
            notes.append(f"{names}: rank {r} but the run has {ranks} ranks (an earlier "
                         "attempt's?): ignored")  # fmt: skip
            continue
        paths.sort(key=_prefer)
        out[r] = (paths[0], paths[0].name.endswith(".tmp"))
        if len(paths) > 1:
            others = ", ".join(p.name for p in paths[1:])
            notes.append(f"rank {r} has several files: {paths[0].name} read, {others} ignored")
    return out, notes
