"""Per-step timestamps of rank 0, written as `steps.json`, so the collector can line steps up with
the Horovod timeline.

Format (JSON object):
    format          "hpcscale.steps"
    version         1
    rank, hostname  who recorded it (always rank 0)
    clock           "monotonic_ns": CLOCK_MONOTONIC, Python's time.monotonic_ns(); Horovod's
                    timeline uses the same clock (C++ steady_clock) on Linux
    anchor          {"monotonic_ns": m, "unix_ns": u, "uncertainty_ns": e}: the two clocks read
                    at the same moment (u taken between two monotonic readings e ns apart; m is
                    their midpoint)
    unix_offset_ns  u - m; a monotonic reading t maps to Unix-epoch microseconds as
                    (t + unix_offset_ns) / 1000, the unit of the timeline's
                    `start_time_since_epoch_in_micros` + `ts`
    burn_in         {"start_ns": [...], "end_ns": [...]}: untimed warm-up steps (graph tracing)
    epoch, step, start_ns, end_ns
                    parallel lists, one entry per timed step (epoch and step from 0); a step is
                    the call of the compiled train step until its results are on the host
"""

from __future__ import annotations

import socket
import time
from typing import Any


def clock_anchor(tries: int = 5) -> dict[str, int]:
    """Read the Unix clock between two monotonic readings; keep the tightest of a few tries."""
    best: dict[str, int] | None = None
    for _ in range(tries):
        m0 = time.monotonic_ns()
        u = time.time_ns()
        m1 = time.monotonic_ns()
        cand = {"monotonic_ns": (m0 + m1) // 2, "unix_ns": u, "uncertainty_ns": m1 - m0}
        if best is None or cand["uncertainty_ns"] < best["uncertainty_ns"]:
            best = cand
    assert best is not None
    return best


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
        return [(e - s) / 1e6 for s, e in zip(self.start, self.end, strict=True)]

    def to_json(self, rank: int) -> dict[str, Any]:
        anchor = clock_anchor()
        return {
            "format": "hpcscale.steps",
            "version": 1,
            "rank": rank,
            "hostname": socket.gethostname(),
            "clock": "monotonic_ns",
            "anchor": anchor,
            "unix_offset_ns": anchor["unix_ns"] - anchor["monotonic_ns"],
            "burn_in": {"start_ns": self.burn_start, "end_ns": self.burn_end},
            "epoch": self.epoch,
            "step": self.step,
            "start_ns": self.start,
            "end_ns": self.end,
        }
