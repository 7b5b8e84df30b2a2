"""The end of a log file, for error messages: one reader for every backend and daemon."""

from __future__ import annotations

import os
from pathlib import Path


def tail(path: Path | str, lines: int = 15, max_bytes: int = 8192) -> str | None:
    """The last `lines` non-blank lines of `path` (read from its last `max_bytes`), or None
    when the file is missing, unreadable or blank: callers say what to show instead."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - max_bytes))
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    kept = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(kept[-lines:]) if kept else None


def last_lines(path: Path | str, lines: int, block: int = 65536) -> bytes:
    """The last `lines` lines of `path`, blank ones included, read backwards from its end in
    blocks (a multi-gigabyte log costs what its end costs). OSError propagates."""
    with open(path, "rb") as fh:
        pos = fh.seek(0, os.SEEK_END)
        data = b""
        while pos > 0 and data.count(b"\n", 0, len(data) - 1) < lines:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
    kept = data.splitlines(keepends=True)[-lines:] if lines > 0 else []
    return b"".join(kept)
