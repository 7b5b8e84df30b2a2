"""Data quality: every run the report leaves out or flags, and why.

A figure silently built on missing or damaged data is worse than no figure, so each check here
returns `Flag`s; the report's "Data quality" section lists all of them and the tables mark the
flagged runs. Checks are pure functions of the tidy run table (one row per run, collector
columns) and are registered in CHECKS; adding a check is one function plus one line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pandas as pd

# "excluded": the run's figures (or some of them) are left out of tables and figures;
# "flagged": kept, but marked where it is shown.
Action = Literal["excluded", "flagged"]


@dataclass(frozen=True)
class Flag:
    run_id: str
    kind: str  # short, stable key: "unreadable_results", "timeline_truncated", "overlap", ...
    action: Action
    reason: str  # one sentence a reader understands without the code


Check = Callable[[pd.DataFrame], list[Flag]]

CHECKS: list[Check] = []


def quality_flags(runs: pd.DataFrame) -> list[Flag]:
    """All flags of all registered checks, in check order."""
    return [flag for check in CHECKS for flag in check(runs)]
