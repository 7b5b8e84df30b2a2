"""Streaming reductions of an extractor's matches: memory stays constant in the number of
matches (a 1 GB log may hold ten million), except where a reduction needs the values
(`median`: a sample of at most MEDIAN_CAP, `series`: the first SERIES_CAP), and then it says so.

What a match captured becomes a number only if it is one, in ASCII digits (`٣.5` is not 3.5,
nor is `nan`, `1_000` or ` inf`), and a finite one (`1e999` is refused, not summed to inf)."""

from __future__ import annotations

import math
import random
import re
from array import array
from dataclasses import dataclass, field

SERIES_CAP = 100_000  # values a `series` keeps (the first ones); a note says when it is cut
MEDIAN_CAP = 100_000  # values a `median` keeps: all of them, else a uniform sample of this many
_BLOCK = 4096  # values summed exactly (math.fsum) at a time
NUMBER = re.compile(rb"[ \t]*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[ \t]*")


def parse_number(text: bytes | None) -> tuple[float | None, str | None]:
    """(value, None), or (None, why not): not a number in ASCII digits, or not finite."""
    if text is None:
        return None, "matched no text for the value group"
    m = NUMBER.fullmatch(text)
    if m is None:
        shown = text[:60].decode("utf-8", "replace")
        return None, f"matched {shown!r}, which is not a number"
    value = float(m.group(1))
    if not math.isfinite(value):
        return None, f"matched {m.group(1).decode()!r}, which is not a finite number"
    return value, None


def _fsum(values: list[float]) -> float:
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf  # finite values whose sum is not: refused by the caller


@dataclass
class Acc:
    """One extractor's matches in one file (one rank's, or the job's output)."""

    reduce: str
    n: int = 0
    first: float = math.nan
    last: float = math.nan
    lo: float = math.inf
    hi: float = -math.inf
    block: list[float] = field(default_factory=list)
    kept: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    bad: str | None = None  # the first match that was not a usable number
    rng: random.Random | None = None

    def add(self, text: bytes | None) -> None:
        value, why = parse_number(text)
        if value is None:
            if self.bad is None:
                self.bad = why
            return
        self.n += 1
        if self.n == 1:
            self.first = value
        self.last = value
        red = self.reduce
        if red in ("sum", "mean"):
            self.block.append(value)
            if len(self.block) >= _BLOCK:
                self.block = [_fsum(self.block)]
        elif red == "min":
            self.lo = min(self.lo, value)
        elif red == "max":
            self.hi = max(self.hi, value)
        elif red == "series":
            if len(self.kept) < SERIES_CAP:
                self.kept.append(value)
        elif red == "median":
            self._sample(value)

    def _sample(self, value: float) -> None:
        """Every value up to MEDIAN_CAP, then a uniform reservoir sample (seeded: the same
        log gives the same median)."""
        if len(self.kept) < MEDIAN_CAP:
            self.kept.append(value)
            return
        if self.rng is None:
            self.rng = random.Random(self.n)
        j = self.rng.randrange(self.n)
        if j < MEDIAN_CAP:
            self.kept[j] = value

    def result(self) -> tuple[float | list[float] | None, str | None, str | None]:
        """(value, why it cannot be given, a note on how it was got); value None when nothing
        matched or the reduction is not finite."""
        if self.n == 0:
            return None, None, None
        red, note = self.reduce, None
        if red == "series":
            if self.n > SERIES_CAP:
                note = f"series kept its first {SERIES_CAP:,} of {self.n:,} values"
            return list(self.kept), None, note
        if red == "median":
            vals = sorted(self.kept)
            mid = len(vals) // 2
            value = vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
            if self.n > MEDIAN_CAP:
                note = f"median of a uniform sample of {MEDIAN_CAP:,} of {self.n:,} values"
            return value, None, note
        value = {
            "last": self.last,
            "first": self.first,
            "min": self.lo,
            "max": self.hi,
            "sum": _fsum(self.block),
            "count": self.last,  # another rank's copy of a rank-0 series: nothing kept
        }.get(red)
        if red == "mean":
            total = _fsum(self.block)
            value = total / self.n if math.isfinite(total) else total
        assert value is not None, red
        if not math.isfinite(value):
            return None, f"the {red} of {self.n:,} values is not finite (overflow)", None
        return value, None, None


ACROSS: tuple[str, ...] = ("sum", "mean", "min", "max")


def combine(values: list[float | list[float]], across: str) -> float | list[float]:
    """Ranks' values into one (`series`: position by position, over the shortest)."""
    if values and isinstance(values[0], list):
        series = [v for v in values if isinstance(v, list)]
        length = min(map(len, series))
        cols = [[s[i] for s in series] for i in range(length)]
        return [float(combine(list(col), across)) for col in cols]  # type: ignore[arg-type]
    nums = [float(v) for v in values if not isinstance(v, list)]
    if across == "sum":
        return _fsum(nums)
    if across == "mean":
        return _fsum(nums) / len(nums)
    return min(nums) if across == "min" else max(nums)


def spread(values: list[float]) -> float:
    """How far ranks' values disagree: (max - min) / |mean|, 0 for equal values."""
    lo, hi = min(values), max(values)
    if hi == lo:
        return 0.0
    mean = abs(_fsum(values) / len(values))
    return (hi - lo) / mean if mean > 0 else math.inf
