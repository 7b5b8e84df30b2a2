"""What the harness-overhead benches share (bench/harness_overhead.py for Horovod,
bench/torch_harness_overhead.py for PyTorch DDP): paired runs and a robust estimate of a ratio.

Why pairs: on a 2-core machine a bare loop's throughput moves by ~8 % from one launch to the next
(memory layout, scheduling, other work), so the best epoch of each side over a few repeats cannot
resolve a 3 % difference. Instead each round runs the configurations of one rank count back to
back (a pair: bare then harness, the next round harness then bare, so a slow drift hits both
sides alike), each run is summarised by the MEDIAN of its epochs after the warm-up epochs, and the
overhead is the MEDIAN over rounds of the per-pair ratio harness / bare, with a distribution-free
confidence interval for that median: sorted ratios x(1) <= ... <= x(n), the interval
[x(k), x(n+1-k)] covers the true median with probability 1 - 2 P(Binomial(n, 1/2) <= k - 1); k is
the largest with coverage >= the level asked (95 %). The rounds of the rank counts run
interleaved (round 1 of each, then round 2, ...) or blocked (every round of one rank count, then
the next's), with optional discarded settling runs whenever the rank count changes (`schedule`):
the PyTorch bench runs blocked with one settling run, as a first launch after the other rank
count ran slow. Pure functions here are unit-tested
(tests/unit/test_bench_overhead_stats.py); stdlib only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import comb, exp, log

Config = tuple[str, int]  # (kind, ranks)
Series = tuple[list[float], list[float]]  # per epoch of one run: images/s, images/cpu-s
Measure = Callable[[str, int], Series]


def median(xs: Sequence[float]) -> float:
    """The middle value (mean of the two middle ones for an even count)."""
    if not xs:
        raise ValueError("median of no values")
    s = sorted(xs)
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def run_figure(per_epoch: Sequence[float], warmup: int = 1) -> float:
    """One run's throughput: the median of its epochs after the first `warmup` (untrusted)."""
    kept = list(per_epoch)[warmup:]
    if not kept:
        raise ValueError(f"{len(per_epoch)} epoch(s) but {warmup} warm-up: nothing measured")
    return median(kept)


def binom_half_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return sum(comb(n, i) for i in range(k + 1)) / 2**n


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int, float]:
    """1-based ranks (lo, hi) of the sorted sample bounding the median's CI, and its coverage.

    The narrowest symmetric order-statistic interval whose coverage reaches `level`; when even
    [min, max] falls short (n < 6 at 95 %), that one with its lower coverage."""
    if n < 1:
        raise ValueError("no pairs")
    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * binom_half_cdf(k, n) >= level:
        k += 1
    return k, n + 1 - k, 1 - 2 * binom_half_cdf(k - 1, n)


def median_ci(xs: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, coverage) of the distribution-free CI for the median of `xs`."""
    lo, hi, coverage = median_ci_ranks(len(xs), level)
    s = sorted(xs)
    return float(s[lo - 1]), float(s[hi - 1]), coverage


def crossover(ratios: Sequence[float]) -> tuple[float, float]:
    """(ratio, order effect) of pairs whose order alternates (round 0 as given, round 1
    reversed, ...), read as a two-period crossover: the geometric mean of the two orders' mean
    ratios, so a slower first run of a pair cancels; and the square root of their quotient,
    how much the given order favours its first side's ratio (1: no effect). Needs both orders."""
    first = [log(r) for r in ratios[0::2]]
    second = [log(r) for r in ratios[1::2]]
    if not first or not second:
        raise ValueError("a crossover needs pairs in both orders")
    a, b = sum(first) / len(first), sum(second) / len(second)
    return exp((a + b) / 2), exp((a - b) / 2)


def order(group: Sequence[Config], i: int) -> list[Config]:
    """Round i's running order: as given on even rounds, reversed on odd ones."""
    return list(group) if i % 2 == 0 else list(reversed(group))


Slot = tuple[Config, int | None]  # a run: its configuration and its round (None: settling)


def schedule(
    groups: Sequence[Sequence[Config]], pairs: int, blocked: bool = False, settle: int = 0
) -> list[Slot]:
    """Every run in running order, each with its round, or None for a settling run.

    Rounds: `pairs` rounds of each group, the group's order reversed every other round
    (`order`). Interleaved (default): round 1 of every group, then round 2 of every group, ...
    Blocked: all rounds of the first group, then all of the next, so the rank count changes
    once per group instead of every round. `settle` runs of the group's first configuration,
    whose figures are discarded, go before the group's first run whenever the previous run
    was of another group (and before the very first run): a launch right after the other
    rank count was the slower one in 8 of 10 pairs of an idle run (session 13)."""
    indexed = list(enumerate(groups))
    if blocked:
        rounds = [(g, i) for g in indexed for i in range(pairs)]
    else:
        rounds = [(g, i) for i in range(pairs) for g in indexed]
    slots: list[Slot] = []
    previous: int | None = None
    for (gi, group), i in rounds:
        if gi != previous:
            slots += [(group[0], None)] * settle
        previous = gi
        slots += [(c, i) for c in order(group, i)]
    return slots


@dataclass(frozen=True)
class Summary:
    """A ratio over pairs: its median, the CI of that median and the CI's coverage."""

    ratio: float
    ci_low: float
    ci_high: float
    coverage: float
    pairs: int


def summarise(ratios: Sequence[float], level: float = 0.95) -> Summary:
    """Median of the per-pair ratios with its distribution-free CI."""
    lo, hi, coverage = median_ci(ratios, level)
    return Summary(median(ratios), lo, hi, coverage, len(ratios))


def lost(summaries: Sequence[Summary], target_pct: float, level: float = 0.95) -> dict[str, object]:
    """The loss over rank counts, (1 - ratio) in %: the worst median (`max_lost_pct`), and the
    highest loss's CI bounds taken rank count by rank count (never narrower than any one
    count's), and a verdict: 'met' when the high bound is within target, 'not met' when even
    the low bound exceeds it, else 'unresolved' (more pairs needed); 'too few pairs' when a CI
    covers less than `level` (under 6 pairs at 95 %), whatever the bounds say."""
    high = round(max(100 * (1 - s.ci_low) for s in summaries), 2)  # as shown, so 1 - 0.97 is 3
    low = round(max(100 * (1 - s.ci_high) for s in summaries), 2)
    verdict = "met" if high <= target_pct else "not met" if low > target_pct else "unresolved"
    if min(s.coverage for s in summaries) < level:
        verdict = "too few pairs"
    return {
        "max_lost_pct": round(100 * (1 - min(s.ratio for s in summaries)), 2),
        "max_lost_ci_low_pct": low,
        "max_lost_ci_high_pct": high,
        "target_pct": target_pct,
        "verdict": verdict,
    }


class Paired:
    """Runs each group (the configurations of one rank count) `pairs` rounds, back to back
    within a round, order reversed every other round, in `schedule`'s order (interleaved by
    default; `blocked`, with `settle` discarded runs at each change of group); keeps each
    counted run's figure (median epoch after warm-up), and the settling runs' apart."""

    def __init__(
        self,
        groups: Sequence[Sequence[Config]],
        pairs: int,
        measure: Measure,
        warmup: int = 1,
        blocked: bool = False,
        settle: int = 0,
    ) -> None:
        self.wall: dict[Config, list[float]] = {c: [] for g in groups for c in g}
        self.cpu: dict[Config, list[float]] = {c: [] for g in groups for c in g}
        self.settled: list[tuple[Config, float]] = []  # (configuration, images/s), not counted
        self.run_s: list[float] = []
        for (kind, np), i in schedule(groups, pairs, blocked, settle):
            t0 = time.monotonic()
            w, c = measure(kind, np)
            self.run_s.append(time.monotonic() - t0)
            if i is None:
                self.settled.append(((kind, np), run_figure(w, warmup)))
                print(f"settling {kind} np={np}: {self.settled[-1][1]:.1f} images/s, not "
                      f"counted ({self.run_s[-1]:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip
                continue
            self.wall[kind, np].append(run_figure(w, warmup))
            self.cpu[kind, np].append(run_figure(c, warmup))
            print(f"pair {i + 1}/{pairs} {kind} np={np}: {self.wall[kind, np][-1]:.1f} "
                  f"images/s, {self.cpu[kind, np][-1]:.1f} images/cpu-s "
                  f"({self.run_s[-1]:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip

    def ratios(self, a: Config, b: Config, per_cpu: bool = False) -> list[float]:
        """Per round: a's figure / b's figure (both from the same round, run back to back)."""
        src = self.cpu if per_cpu else self.wall
        return [x / y for x, y in zip(src[a], src[b], strict=True)]

    def typical(self, c: Config) -> float:
        """The median run's images/s of one configuration, for context in the JSON line."""
        return round(median(self.wall[c]), 1)

    def compare(self, a: Config, b: Config, level: float = 0.95) -> tuple[Summary, Summary]:
        """a against b over the pairs: (wall-clock summary, CPU-time summary)."""
        return summarise(self.ratios(a, b), level), summarise(self.ratios(a, b, True), level)


def fields(prefix: str, wall: Summary, cpu: Summary) -> dict[str, object]:
    """The JSON line's keys for one comparison: `<prefix>ratio`, `<prefix>ci`, `<prefix>pairs`,
    `<prefix>ci_coverage`, and the same ratio and CI of CPU time (`<prefix>cpu_ratio`, ...)."""
    return {
        f"{prefix}ratio": round(wall.ratio, 4),
        f"{prefix}ci": [round(wall.ci_low, 4), round(wall.ci_high, 4)],
        f"{prefix}cpu_ratio": round(cpu.ratio, 4),
        f"{prefix}cpu_ci": [round(cpu.ci_low, 4), round(cpu.ci_high, 4)],
        f"{prefix}pairs": wall.pairs,
        f"{prefix}ci_coverage": round(wall.coverage, 4),
    }
