"""Rank 0's per-step timestamps, written as `steps.json` (format: hpcscale/formats/steps.py), so
the collector can line steps up with the Horovod timeline."""

from __future__ import annotations

import math
import socket
import time
from typing import Optional

from hpcscale.formats.steps import FORMAT, VERSION, BurnIn, StepAnchor, StepsFile


def clock_anchor(tries: int = 5) -> dict[str, int]:
    """Read the Unix clock between two monotonic readings; keep the tightest of a few tries."""
    best: Optional[dict[str, int]] = None
    for _ in range(tries):
        m0 = time.monotonic_ns()
        u = time.time_ns()
        m1 = time.monotonic_ns()
        cand = {"monotonic_ns": (m0 + m1) // 2, "unix_ns": u, "uncertainty_ns": m1 - m0}
        if best is None or cand["uncertainty_ns"] < best["uncertainty_ns"]:
            best = cand
    assert best is not None
    return best


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an ascending list; q in [0, 100]."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def step_time_summary(durations_ms: list[float]) -> dict[str, float]:
    """metrics.json's `step_time` of a run's timed steps (any order): count, mean, p50/90/99."""
    ordered = sorted(durations_ms)
    return {
        "count": len(ordered),
        "mean_ms": sum(ordered) / len(ordered) if ordered else float("nan"),
        "p50_ms": percentile(ordered, 50),
        "p90_ms": percentile(ordered, 90),
        "p99_ms": percentile(ordered, 99),
    }


class StepLog:
    def __init__(self) -> None:
        self.burn_start: list[int] = []
        self.burn_end: list[int] = []
        self.epoch: list[int] = []
        self.step: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []

    def burn_in(self, start_ns: int, end_ns: int) -> None:
        self.burn_start.append(start_ns)
        self.burn_end.append(end_ns)

    def add(self, epoch: int, step: int, start_ns: int, end_ns: int) -> None:
        self.epoch.append(epoch)
        self.step.append(step)
        self.start.append(start_ns)
        self.end.append(end_ns)

    def durations_ms(self) -> list[float]:
        return [(e - s) / 1e6 for s, e in zip(self.start, self.end)]

    def to_file(self, rank: int) -> StepsFile:
        """The log as `steps.json`, anchored to the Unix clock now."""
        anchor = StepAnchor(**clock_anchor())
        return StepsFile(
            format=FORMAT,
            version=VERSION,
            rank=rank,
            hostname=socket.gethostname(),
            anchor=anchor,
            unix_offset_ns=anchor.unix_ns - anchor.monotonic_ns,
            burn_in=BurnIn(start_ns=self.burn_start, end_ns=self.burn_end),
            epoch=self.epoch,
            step=self.step,
            start_ns=self.start,
            end_ns=self.end,
        )
