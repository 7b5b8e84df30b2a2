"""Whether this process may fork workers that share its memory: both parallel paths (rendering
job scripts, drawing report figures) ask the same question."""

from __future__ import annotations

import multiprocessing as mp
import threading


def can_fork() -> bool:
    """Fork exists here, and no other thread runs whose locks the child would copy mid-use
    (a notebook kernel's threads, a progress bar's refresh)."""
    return "fork" in mp.get_all_start_methods() and threading.active_count() == 1
