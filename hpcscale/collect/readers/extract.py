"""Figures of merit from a program's output: regular expressions over its lines, streamed.

A long job's log reaches gigabytes, so a file is read once, line by line, for every extractor
that reads it, and only the matches are kept. Nothing is silent: an extractor that matched
nothing, or matched text that is not a number, comes back as a problem naming the metric, the
pattern and the file, with the file's last lines.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hpcscale.util.logtail import tail

Reduce = Literal["last", "first", "mean", "median", "min", "max", "sum", "series"]
REDUCES: tuple[str, ...] = ("last", "first", "mean", "median", "min", "max", "sum", "series")
OUTPUT = "output"  # the job's captured output (all ranks)

_REDUCERS: dict[str, Callable[[list[float]], float]] = {
    "last": lambda v: v[-1],
    "first": lambda v: v[0],
    "mean": statistics.fmean,
    "median": statistics.median,
    "min": min,
    "max": max,
    "sum": math.fsum,
}


@dataclass(frozen=True)
class Extractor:
    """One figure: `pattern` has one capture group (or a group named `value`)."""

    name: str
    pattern: str
    source: str = OUTPUT
    reduce: str = "last"
    unit: str = ""
    better: str = "lower"
    scale: str = "global"
    required: bool = True

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


@dataclass(frozen=True)
class Unparsed:
    """A required figure the run's output does not give: what the Data quality section shows."""

    metric: str
    pattern: str
    file: str
    reason: str
    last_lines: str | None

    def message(self) -> str:
        return f"{self.metric}: {self.reason} (pattern {self.pattern!r} in {self.file})"


@dataclass
class Extracted:
    """Reduced figures (`series` ones as lists) and the problems met on the way."""

    values: dict[str, float | list[float]] = field(default_factory=dict)
    unparsed: list[Unparsed] = field(default_factory=list)


def pattern_error(pattern: str) -> str | None:
    """Why `pattern` cannot be an extractor (bad syntax, no capture group), or None."""
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        return f"not a regular expression: {exc}"
    if "value" not in rx.groupindex and rx.groups != 1:
        return f"needs one capture group (or one named 'value'), has {rx.groups}"
    return None


def _group(rx: re.Pattern[str]) -> int | str:
    return "value" if "value" in rx.groupindex else 1


def scan_lines(
    lines: Iterable[str], extractors: Sequence[Extractor]
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Every match of every extractor in `lines` (re.search per line, so launcher prefixes do
    not matter): numbers per metric, and per metric the first match that was not a number."""
    compiled = [(e.name, e.compiled()) for e in extractors]
    groups = [_group(rx) for _, rx in compiled]
    found: dict[str, list[float]] = {e.name: [] for e in extractors}
    bad: dict[str, str] = {}
    for line in lines:
        for (name, rx), grp in zip(compiled, groups, strict=True):
            m = rx.search(line)
            if m is None:
                continue
            text = m.group(grp)
            try:
                found[name].append(float(text))
            except (TypeError, ValueError):
                bad.setdefault(name, str(text))
    return found, bad


def _open_lines(path: Path) -> Iterable[str]:
    with open(path, encoding="utf-8", errors="replace", buffering=1 << 20) as fh:
        yield from fh


def extract(sources: dict[str, Path], extractors: Sequence[Extractor]) -> Extracted:
    """Read each source file once for all the extractors that name it. `sources` maps a
    source name (`output`, or a path relative to the run directory) to its file."""
    out = Extracted()
    by_source: dict[str, list[Extractor]] = {}
    for ex in extractors:
        by_source.setdefault(ex.source, []).append(ex)
    for source, exs in by_source.items():
        path = sources.get(source)
        if path is None or not path.is_file():
            for ex in exs:
                if ex.required:
                    out.unparsed.append(
                        Unparsed(ex.name, ex.pattern, str(path or source), "file missing", None)
                    )
            continue
        found, bad = scan_lines(_open_lines(path), exs)
        for ex in exs:
            vals = found[ex.name]
            if ex.required and ex.name in bad:
                reason = f"matched {bad[ex.name]!r}, which is not a number"
                out.unparsed.append(
                    Unparsed(ex.name, ex.pattern, str(path), reason, tail(path, lines=10))
                )
            elif vals:
                out.values[ex.name] = (
                    list(vals) if ex.reduce == "series" else _REDUCERS[ex.reduce](vals)
                )
            elif ex.required:
                out.unparsed.append(
                    Unparsed(ex.name, ex.pattern, str(path), "no line matches", tail(path, 10))
                )
    return out
