"""Compute / communication split of one run, two ways.

1. Vemparala Narayana Murthy's arithmetic (the GAN study) from per-epoch totals: delegated to
   `hpcscale.analysis.overlap.split` so there is one definition (`seed_split` below).
2. The exact view: rank 0's own step spans (`steps.json`, written by the job harness) swept
   against the timeline's communication intervals (`comm_s`: the top-level collectives, unioned
   across tensors), inside the window from the first timed step's start to the last one's end
   (the window of the collector's per-epoch `comm_s`), reported per epoch:
   - compute       = time inside a step and outside communication
   - overlap       = time where a communication interval and a step coincide
   - exposed comm  = communication while no step runs
   A step is the call of the compiled train step until its results are on the host, so "inside a
   step" cannot tell computing from waiting for a collective: `overlap` is communication that
   runs while a step is in flight, an upper bound on communication hidden behind computation.

Alignment of the two clocks (see docs/timeline.md):
    The trace stamps each event with `ts`, integer µs of a steady clock since its start, and
    its reader gives the Unix time of `ts` 0 (a timeline writes it once as
    `start_time_since_epoch_in_micros`, a profiler trace as `baseTimeNanoseconds`).
    The harness stamps steps with Python's `time.monotonic_ns()` and records an anchor:
    `time.time_ns()` read between two monotonic readings `uncertainty_ns` apart, giving
    `unix_offset_ns`. On Linux both monotonic clocks are CLOCK_MONOTONIC and both
    wall clocks CLOCK_REALTIME, and REALTIME - MONOTONIC only changes when the wall clock is
    stepped (NTP slewing moves both alike). So a step instant t maps onto the timeline axis as
        ts(t) = (t + unix_offset_ns) / 1000 - start_time_since_epoch_in_micros
    with error at most uncertainty_ns / 2 + 2 µs (1 µs for each truncation to whole µs: the trace's
    start time and its `ts`), unless the wall clock was stepped between the trace's start and
    the harness's anchor. Each overlap figure can be off by that bound times the number of
    communication intervals that cross a step boundary (reported as `bound_s`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpcscale.analysis.overlap import OVERLAP_COLUMNS, split
from hpcscale.collect import intervals as iv
from hpcscale.formats.steps import load_steps_file
from hpcscale.model.errors import InputError

TRUNCATION_US = 2


@dataclass(frozen=True)
class Steps:
    """Step spans on the Unix clock, ns, plus what the alignment is worth."""

    epoch: np.ndarray
    start_unix_ns: np.ndarray
    end_unix_ns: np.ndarray
    burn_in_unix_ns: np.ndarray  # (n, 2)
    uncertainty_ns: int

    @property
    def epochs(self) -> int:
        return len(np.unique(self.epoch))

    def window_unix_us(self) -> tuple[int, int]:
        """The timed steps' window, Unix-epoch µs (rounded outwards)."""
        return int(self.start_unix_ns.min() // 1000), -int(-self.end_unix_ns.max() // 1000)


def load_steps(path: str | os.PathLike[str]) -> Steps:
    """Read and check `steps.json` (format: hpcscale/formats/steps.py); failures name the file."""
    p = Path(path)
    f = load_steps_file(p)
    start = np.asarray(f.start_ns, dtype=np.int64) + f.unix_offset_ns
    end = np.asarray(f.end_ns, dtype=np.int64) + f.unix_offset_ns
    if np.any(end < start):
        raise InputError(str(p), None, "end_ns", "a step ends before it starts")
    burn = np.column_stack(
        (
            np.asarray(f.burn_in.start_ns, dtype=np.int64) + f.unix_offset_ns,
            np.asarray(f.burn_in.end_ns, dtype=np.int64) + f.unix_offset_ns,
        )
    ).reshape(-1, 2)
    return Steps(
        epoch=np.asarray(f.epoch, dtype=np.int64),
        start_unix_ns=start,
        end_unix_ns=end,
        burn_in_unix_ns=burn,
        uncertainty_ns=f.anchor.uncertainty_ns,
    )


def to_timeline_ns(unix_ns: np.ndarray, start_time_us: int) -> np.ndarray:
    """Unix-epoch ns -> the timeline's axis (ns since the trace's start)."""
    return np.asarray(unix_ns, dtype=np.int64) - np.int64(start_time_us) * 1000


@dataclass
class ExactSplit:
    """Per-epoch means, seconds; `per_epoch` keeps each epoch's figures."""

    compute_s: float
    overlap_s: float
    exposed_comm_s: float
    steps_s: float
    comm_s: float
    epochs: int
    bound_s: float
    alignment_error_us: float
    per_epoch: list[dict[str, float]] = field(default_factory=list)


def exact_split(steps: Steps, comm_us: iv.Intervals, start_time_us: int) -> ExactSplit:
    """Sweep the step spans against the communication intervals (timeline µs).

    The window runs from the first timed step's start to the last one's end, the window the
    collector's `comm_s` uses, so overlap + exposed = comm there; epoch e's slice runs from its
    first step to the next epoch's first step (the last to the last step's end), so the slices
    tile the window and the per-epoch mean is the window's total / epochs."""
    comm_ns = iv.union(np.asarray(comm_us, dtype=np.int64).reshape(-1, 2) * 1000)
    start = to_timeline_ns(steps.start_unix_ns, start_time_us)
    end = to_timeline_ns(steps.end_unix_ns, start_time_us)
    err_ns = steps.uncertainty_ns / 2 + TRUNCATION_US * 1000
    epochs = np.unique(steps.epoch).tolist()
    firsts = [int(start[steps.epoch == e].min()) for e in epochs]
    edges = [*firsts, int(end.max())]
    spans_all = iv.union(np.column_stack((start, end)))
    rows: list[dict[str, float]] = []
    crossings = 0
    for i, e in enumerate(epochs):
        lo, hi = edges[i], edges[i + 1]
        spans = _clip(spans_all, lo, hi)
        comm = _clip(comm_ns, lo, hi)
        s = iv.sweep(spans, comm)
        crossings += _crossings(spans, comm)
        rows.append(
            {
                "epoch": float(e),
                "compute_s": s.a_only / 1e9,
                "overlap_s": s.both / 1e9,
                "exposed_comm_s": s.b_only / 1e9,
                "steps_s": iv.sum_lengths(spans) / 1e9,
                "comm_s": iv.sum_lengths(comm) / 1e9,
            }
        )
    n = len(rows)

    def mean(key: str) -> float:
        return float(sum(r[key] for r in rows) / n)

    return ExactSplit(
        compute_s=mean("compute_s"),
        overlap_s=mean("overlap_s"),
        exposed_comm_s=mean("exposed_comm_s"),
        steps_s=mean("steps_s"),
        comm_s=mean("comm_s"),
        epochs=n,
        bound_s=crossings * 2 * err_ns / 1e9 / n,
        alignment_error_us=err_ns / 1000,
        per_epoch=rows,
    )


def _clip(ivs: iv.Intervals, lo: int, hi: int) -> iv.Intervals:
    if not len(ivs):
        return ivs
    c = np.clip(ivs, lo, hi)
    return c[c[:, 1] > c[:, 0]]


def _crossings(spans: iv.Intervals, comm: iv.Intervals) -> int:
    """How many communication intervals contain a step boundary (each can shift the split)."""
    if not len(comm) or not len(spans):
        return 0
    bounds = np.sort(spans.ravel())
    first = np.searchsorted(bounds, comm[:, 0], side="right")
    last = np.searchsorted(bounds, comm[:, 1], side="left")
    return int((last > first).sum())


def seed_split(
    epoch_time_s: float, comm_s: float, wait_for_data_s: float, wait_for_other_s: float
) -> dict[str, float]:
    """Seed 001's arithmetic for one run (the analysis module owns the formula)."""
    parts = split(epoch_time_s, comm_s, wait_for_data_s, wait_for_other_s)
    return {name: float(getattr(parts, name)) for name in OVERLAP_COLUMNS}
