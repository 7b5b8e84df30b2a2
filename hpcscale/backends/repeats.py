"""`submit --max-failures N`: stop a campaign whose runs all fail the same way (no TensorFlow,
a mistyped path) after N of them, instead of running every one to the same traceback.

Two failures are the same when their reason lines agree once paths, run ids and numbers are
normalised (`/tmp/a/run1/x.py` and `/tmp/b/run2/x.py`, `exit code 1` and `exit code 2`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpcscale.state.ledger import RunRow

DEFAULT_MAX_FAILURES = 3  # 0: never stop
STOPPED = "stopped after"  # how a SLURM run cancelled before it started begins its message
_PATH = re.compile(r"(?:~|\.{0,2})?/[^\s'\":,)]+")
_NUMBER = re.compile(r"(?<![A-Za-z])[0-9a-f]*[0-9][0-9a-f]*(?:\.[0-9]+)?(?![A-Za-z])")


def normalised(reason: str) -> str:
    """The reason with every path and number replaced, so reruns of one mistake compare equal."""
    return _NUMBER.sub("N", _PATH.sub("PATH", reason.strip())).lower()


class SameFailures:
    """Counts failures by normalised reason; `add` returns the reason once `limit` runs have
    failed with it (never with `limit` 0)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts: Counter[str] = Counter()

    def add(self, reason: str) -> str | None:
        if self.limit <= 0:
            return None
        key = normalised(reason)
        self.counts[key] += 1
        return reason if self.counts[key] >= self.limit else None


def resumable(row: RunRow) -> bool:
    """A SLURM run cancelled before it started because others failed the same way
    (backends/slurm/stop.py): the next `submit` submits it, as the local backend's rest."""
    return row.state == "CANCELLED" and (row.message or "").startswith(STOPPED)
