"""Atomic output: a sibling temp file, then os.replace, so a reader never sees half a file.

One helper for the core (rendered scripts, results, the ledger's side files) and the jobs
(metrics.json, steps.json, the copied timeline). mkstemp creates 0600; a file others read gets
the mode `open()` would give it (0666 minus the umask) unless the caller asks for another.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Union


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_beside(path: Path, mode: Optional[int]) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return fd, tmp


def atomic_write(
    path: Path, data: Union[str, bytes], mode: Optional[int] = None, durable: bool = False
) -> None:
    """Write `data` (text is UTF-8 encoded) to `path` atomically.

    `durable` fsyncs the data before the rename: for files that must survive a crash (job
    outputs, submission records); rendered files skip it, they can be rendered again."""
    fd, tmp = _temp_beside(path, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_copy(src: Path, dst: Path, mode: Optional[int] = None, durable: bool = False) -> None:
    """Copy `src` to `dst` atomically (the job's node-local timeline into the run directory);
    shutil.copyfile, so the kernel copies (sendfile): timelines reach GBs."""
    fd, tmp = _temp_beside(dst, mode)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
