"""Interleaved repeats, used by torch_trace_cost_bench.py: each configuration measured in turn,
`repeats` times over (so a change of load on this shared machine hits every configuration
alike), and the best of each kept. The harness overhead benches pair their runs instead
(overhead_stats.py: a median of per-pair ratios, with its confidence interval)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

Config = tuple[str, int]  # (kind, ranks)
Measure = Callable[[str, int], tuple[list[float], list[float]]]  # -> (images/s, images/cpu-s)


class Interleaved:
    def __init__(self, configs: Sequence[Config], repeats: int, measure: Measure) -> None:
        self.wall: dict[Config, list[float]] = {c: [] for c in configs}
        self.cpu: dict[Config, list[float]] = {c: [] for c in configs}
        for _ in range(repeats):
            for kind, np in configs:
                w, c = measure(kind, np)
                self.wall[kind, np] += w
                self.cpu[kind, np] += c
                print(f"{kind} np={np}: best epoch {max(w):.1f} images/s, "
                      f"{max(c):.1f} images/cpu-s", file=sys.stderr, flush=True)  # fmt: skip

    def best(self, kind: str, np: int, per_cpu: bool = False) -> float:
        return round(max((self.cpu if per_cpu else self.wall)[kind, np]), 1)

    def ratio(self, a: Config, b: Config, per_cpu: bool = False) -> float:
        return round(self.best(*a, per_cpu) / self.best(*b, per_cpu), 4)
