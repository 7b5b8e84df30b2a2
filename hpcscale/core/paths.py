"""Where state lives: <workdir>/<campaign>/{campaign.yaml, ledger.sqlite, runs/<id>/, report/}."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DEFAULT_WORKDIR = "hpcscale-runs"


def workdir(explicit: str | Path | None = None) -> Path:
    return Path(explicit or os.environ.get("HPCSCALE_WORKDIR") or DEFAULT_WORKDIR).absolute()


def campaign_dir(name: str, wd: str | Path | None = None) -> Path:
    return workdir(wd) / name


def run_dir(campaign: str, run_id: str, wd: str | Path | None = None) -> Path:
    return campaign_dir(campaign, wd) / "runs" / run_id


def atomic_write(
    path: Path, text: str | bytes, mode: int | None = None, durable: bool = False
) -> None:
    """Write via a temp file in the same directory and rename: readers never see half a file.

    `durable` adds an fsync; rendered files skip it (they can be rendered again, the ledger
    is what must survive a crash)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
