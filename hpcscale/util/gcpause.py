"""Pause the cyclic garbage collector around allocation-heavy loops."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Expanding and rendering thousands of runs allocates millions of objects and no cycles;
    the collector would walk the growing heap again and again (about a fifth of the time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
