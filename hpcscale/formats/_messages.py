"""Turning msgspec's messages into the key path an InputError shows."""

from __future__ import annotations


def key_of(message: str) -> str | None:
    """msgspec says '... - at `$.step_time.p50_ms`'; keep the path for the error's key."""
    marker = "at `$."
    if marker not in message:
        return None
    return message.split(marker, 1)[1].split("`", 1)[0] or None
