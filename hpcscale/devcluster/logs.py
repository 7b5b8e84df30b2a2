"""The last lines of a daemon's or a setup tool's log, for error messages."""

from __future__ import annotations

from pathlib import Path

from hpcscale.util.logtail import tail


def excerpt(path: Path | str, lines: int = 15) -> str:
    return tail(path, lines, max_bytes=8192) or f"(no log at {path})"
