"""Errors the format loaders share: msgspec's messages turned into the key path an InputError
shows, and unreadable files named."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from hpcscale.model.errors import InputError


def key_of(message: str) -> Optional[str]:
    """msgspec says '... - at `$.step_time.p50_ms`'; keep the path for the error's key."""
    marker = "at `$."
    if marker not in message:
        return None
    return message.split(marker, 1)[1].split("`", 1)[0] or None


def read_bytes(path: Union[str, os.PathLike[str]], what: str) -> tuple[str, bytes]:
    """(path as text, its bytes); a file that cannot be read is an InputError naming it."""
    p = Path(path)
    try:
        return str(p), p.read_bytes()
    except OSError as exc:
        raise InputError(str(p), None, None, f"cannot read {what}: {exc.strerror}") from exc
