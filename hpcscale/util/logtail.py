"""The end of a log file, for error messages and `hpcscale logs --tail`: one reader for every
backend and daemon.

Reading backwards stops after the lines asked for. A job that never writes a newline (progress
bars redrawn with `\\r`) has one line as long as its output: finding its start re-read all it
had read for each block (quadratic: 50 MB took 40 s); now each byte is read once and only a
line's last LINE_BYTES are kept: a longer line is cut to those, after a note (CUT_NOTE).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from hpcscale.util.text import printable

LINE_BYTES = 64 * 1024  # of one line `last_lines` shows: its end
CUT_NOTE = b"[hpcscale: line cut: only its last %d bytes follow]\n"


def tail(path: Path | str, lines: int = 15, max_bytes: int = 8192) -> str | None:
    """The last `lines` non-blank lines of `path` (read from its last `max_bytes`), or None
    when the file is missing, unreadable or blank: callers say what to show instead. Terminal
    escapes and control characters are removed (the text is shown, never obeyed)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - max_bytes))
            text = printable(fh.read().decode(errors="replace"))
    except OSError:
        return None
    kept = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(kept[-lines:]) if kept else None


def last_lines(path: Path | str, lines: int, block: int = 65536, cut: int = LINE_BYTES) -> bytes:
    """The last `lines` lines of `path` (split at newlines only, blank ones included), read
    backwards from its end in blocks: a multi-gigabyte log costs what its end costs, and a line
    without end costs one pass over it (only its last `cut` bytes are kept: a longer line is
    those, after CUT_NOTE). OSError propagates."""
    if lines <= 0:
        return b""
    found: list[tuple[bytes, int]] = []  # (its last `cut` bytes, its length), last line first
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return b""
        fh.seek(size - 1)
        final_newline = fh.read(1) == b"\n"
        pos = size - 1 if final_newline else size  # the last line's content ends here
        parts: list[bytes] = []  # the line being read, backwards: its pieces, last first
        kept = length = 0
        while len(found) < lines:
            if pos == 0:  # the file's first line
                found.append((b"".join(reversed(parts))[-cut:], length))
                break
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step)
            hi = len(chunk)
            while len(found) < lines:
                nl = chunk.rfind(b"\n", 0, hi)
                piece = chunk[nl + 1 : hi]
                length += len(piece)
                if kept < cut:  # past `cut` bytes a line is only counted
                    parts.append(piece)
                    kept += len(piece)
                if nl < 0:
                    break
                found.append((b"".join(reversed(parts))[-cut:], length))
                parts, kept, length, hi = [], 0, 0, nl
    out = []
    for i, (text, length) in enumerate(reversed(found)):
        end = b"\n" if final_newline or i < len(found) - 1 else b""
        out.append((CUT_NOTE % cut if length > cut else b"") + text + end)
    return b"".join(out)


def copy_shown(path: Path | str, out: BinaryIO, lines: int | None, terminal: bool) -> None:
    """`hpcscale logs`: the file (or its last `lines`) to `out`, as is; to a terminal, without
    the job's terminal escapes (`terminal`), so its bytes never drive the user's terminal."""
    if lines is not None:
        data = last_lines(path, lines)
        out.write(printable(data.decode(errors="replace")).encode() if terminal else data)
        return
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20) + (fh.readline(1 << 16) if terminal else b""):
            out.write(printable(chunk.decode(errors="replace")).encode() if terminal else chunk)
