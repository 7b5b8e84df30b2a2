"""Which campaign file owns a campaign directory. Two files with the same `name:` would share
one directory, and the second's render would mark the first's finished runs stale: the first
file to render claims the name, a second is refused (naming the first) unless it takes the
name over (`--force`). A claim whose file is gone (moved, deleted) passes to the next file.
"""

from __future__ import annotations

import os
from pathlib import Path

from hpcscale.formats.atomic import atomic_write
from hpcscale.model.errors import UsageError

OWNER_FILE = ".campaign-file"  # in the campaign directory: the owning file's absolute path


def owner_of(cdir: Path) -> Path | None:
    try:
        text = (cdir / OWNER_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


def check_claim(cdir: Path, campaign_file: Path, force: bool = False) -> None:
    """Refuse `campaign_file` rendering into `cdir` when another existing file owns it."""
    owner = owner_of(cdir)
    mine = Path(os.path.abspath(campaign_file))
    if force or owner is None or owner == mine or not owner.is_file():
        return
    raise UsageError(
        f"{campaign_file}: campaign name {cdir.name!r} belongs to {owner} (its runs are in "
        f"{cdir}); give this file another `name:`, or pass --force to take the name over"
    )


def claim(cdir: Path, campaign_file: Path) -> None:
    """Record `campaign_file` as the owner of `cdir` (after a render into it)."""
    if cdir.is_dir():
        atomic_write(cdir / OWNER_FILE, os.path.abspath(campaign_file) + "\n")


def file_dir(cdir: Path) -> Path:
    """The folder the campaign's relative paths (a `system: local.yaml` beside it) are read
    from: the owning file's, else the campaign directory (a copy of the file lies there)."""
    owner = owner_of(cdir)
    return owner.parent if owner is not None and owner.parent.is_dir() else cdir
