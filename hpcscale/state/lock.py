"""A per-campaign advisory lock, so two submitters never submit the same run twice."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hpcscale.model.errors import HpcscaleError


class Busy(HpcscaleError):
    exit_code = 3


@contextmanager
def campaign_lock(campaign_dir: Path, what: str, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive flock on <campaign>/.lock; the kernel frees it if we die."""
    campaign_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(campaign_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise Busy(f"another hpcscale {what} holds {campaign_dir / '.lock'}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {what}\n".encode())
        yield
    finally:
        os.close(fd)
