"""The per-user index of the workdirs hpcscale has rendered into, so `hpcscale status NAME`
finds a campaign from any directory, as squeue users expect.

One absolute path a line in `$XDG_DATA_HOME/hpcscale/workdirs` (default
`~/.local/share/hpcscale/workdirs`). Appending one short line is atomic with O_APPEND, so
concurrent renders need no lock; readers drop duplicates and workdirs that no longer exist.
It is a search aid only: nothing is ever read from it but paths, and losing it loses nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

INDEX_NAME = "workdirs"


def index_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "hpcscale" / INDEX_NAME


def remember(workdir: Path) -> None:
    """Add `workdir` to the index (once; an unwritable home is not an error)."""
    path = index_path()
    wd = str(workdir.absolute())
    if "\n" in wd:
        return
    try:
        if wd in known_lines(path):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (wd + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def known_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return list(dict.fromkeys(line for line in text.splitlines() if line.startswith("/")))


def known_workdirs() -> list[Path]:
    """The workdirs in the index that still exist, oldest first."""
    return [Path(p) for p in known_lines(index_path()) if Path(p).is_dir()]
