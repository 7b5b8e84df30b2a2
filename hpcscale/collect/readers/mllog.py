"""MLPerf logging lines (`:::MLLOG {json}`) -> per-epoch times, throughput and series.

The format of the mlperf-logging package (and of `hpcscale.probe`), read without that package:
each line holds `time_ms`, `event_type` (INTERVAL_START, INTERVAL_END, POINT_IN_TIME), `key`,
`value` and `metadata` (`epoch_num`, `samples_count`, `status`, ...). Epoch times come from
`epoch_start`/`epoch_stop` pairs or, in a log without them (the BERT, GPT-3, LLaMA-LoRA and
Stable Diffusion references), from `block_start`/`block_stop` pairs keyed by `first_epoch_num`:
a block of `epoch_count` epochs is that many epochs, each given the block's mean time (the log
says nothing finer). The samples of an epoch come from `samples_count` (the stop's metadata or
a point event), else `train_samples`, else `global_batch_size` x the epoch's steps. A figure the
lines cannot support is left out and said, never guessed; so is every line the reader skips.
What a program writes is never trusted: a line it cannot read is counted, never a crash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hpcscale.formats.exit_record import ExitRecord

MARKER = ":::MLLOG"
# Keys that are bookkeeping, not series to draw.
_NOT_SERIES = frozenset(
    {"samples_count", "train_samples", "eval_samples", "global_batch_size", "step_time_ms"}
)
# MLPerf's names -> the tidy table's.
RENAMES = {"eval_accuracy": "val_accuracy"}
# Epoch numbers are whole numbers in [0, MAX_EPOCH_NUM] (BERT numbers them in samples).
MAX_EPOCH_NUM = 1 << 53
# A series is drawn per epoch number, from the log's first; past this many it is not drawn.
MAX_AXIS = 10_000
# Blocks expand into at most this many epochs in all (else each block counts as one, said).
MAX_BLOCK_EPOCHS = 100_000
# Time stamps past +-1e15 ms (year 33658) and counts past 1e18 are damage, not data: within
# them every sum the reader takes stays a finite float.
MAX_TIME_MS = 1e15
MAX_COUNT = 1e18


@dataclass
class MllogRun:
    """What one log says. Lists are ordered by epoch number."""

    epochs: list[int] = field(default_factory=list)
    epoch_time_s: list[float] = field(default_factory=list)
    epoch_samples: list[float] = field(default_factory=list)  # NaN where unknown
    # per epoch number from the log's first (`epochs[0]` or a series' first), NaN where absent
    series: dict[str, list[float]] = field(default_factory=dict)
    step_p50_ms: list[float] = field(default_factory=list)  # per epoch, NaN where unknown
    block_time_s: list[float] = field(default_factory=list)  # block_start/stop pairs, in order
    fit_time_s: float = math.nan
    status: str | None = None
    stopped: bool = False  # a run_stop was logged (whatever its status)
    lines: int = 0
    bad_lines: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def images_per_s(self) -> float:
        """Samples of the timed epochs over their total time (NaN unless every epoch's
        samples are known): a rate that adds up, not a mean of rates."""
        if not self.epoch_time_s or any(math.isnan(s) for s in self.epoch_samples):
            return math.nan
        total = math.fsum(self.epoch_time_s)
        return math.fsum(self.epoch_samples) / total if total > 0 else math.nan

    @property
    def epoch_time_mean_s(self) -> float:
        t = self.epoch_time_s
        return math.fsum(t) / len(t) if t else math.nan

    def end_notes(self, ended: ExitRecord | None = None) -> list[str]:
        """What the log says of how the run ended, for the row's notes. Without a run_stop it
        says only that, and how the job ended when its exit record (`ended`) tells: the exit,
        not the log, tells a crash from a program that never logs a run_stop."""
        if self.stopped:
            if self.status is not None and self.status != "success":
                return [f"MLLOG run_stop status {self.status!r}"]
            return []
        if not self.epoch_time_s:
            return []
        how = "" if ended is None else f" (the job ended with {ended.describe()})"
        return [f"no MLLOG run_stop logged{how}: its figures are from the epochs it logged"]


def _float(value: Any, finite: bool = True) -> float | None:
    """A JSON number (or numeric string) as a float; None for anything else, for a number no
    float holds (a 401-digit integer) and, when `finite`, for NaN and the infinities."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        x = float(value)
    except (ValueError, OverflowError):
        return None
    return x if not finite or math.isfinite(x) else None


def _whole(value: Any, low: int, high: int) -> int | None:
    """A whole number in [low, high] (`3` or `3.0`), else None (NaN, 1e999, 2.5, "x")."""
    x = _float(value)
    if x is None or not x.is_integer() or not low <= x <= high:
        return None
    return int(x)


def _records(lines: Iterable[str], run: MllogRun) -> Iterable[tuple[str, Any, float, dict]]:
    """(key, record, time_ms, metadata) of each readable MLLOG line; the rest counted bad."""
    for line in lines:
        at = line.find(MARKER)
        if at < 0:
            continue
        run.lines += 1
        try:
            rec = json.loads(line[at + len(MARKER) :])
        except (ValueError, RecursionError):  # RecursionError: `[[[[...` nested past the stack
            run.bad_lines += 1
            continue
        meta = rec.get("metadata") if isinstance(rec, dict) else None
        t = _float(rec.get("time_ms")) if isinstance(rec, dict) else None
        t = None if t is None or abs(t) > MAX_TIME_MS else t
        if t is None or not isinstance(rec.get("key"), str) or not isinstance(meta, dict | None):
            run.bad_lines += 1
            continue
        yield rec["key"], rec, t, meta or {}


@dataclass
class _Block:
    start: float | None = None
    stop: float | None = None
    count: int | None = None
    samples: float | None = None


@dataclass
class _Fold:
    """The first value of each key per epoch, as the lines give them."""

    starts: dict[int, float] = field(default_factory=dict)
    stops: dict[int, float] = field(default_factory=dict)
    samples: dict[int, float] = field(default_factory=dict)
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)
    blocks: dict[int, _Block] = field(default_factory=dict)
    points: dict[str, dict[int, float]] = field(default_factory=dict)
    unnumbered: dict[str, list[float]] = field(default_factory=dict)
    bad_numbers: int = 0  # an epoch_num, samples_count or epoch_count that is no such number
    run_start: float | None = None
    run_stop: float | None = None
    train_samples: float | None = None
    global_batch: float | None = None


def _samples(fold: _Fold, value: Any) -> float | None:
    n = _float(value)
    if value is not None and (n is None or not 0 <= n <= MAX_COUNT):
        fold.bad_numbers += 1
        return None
    return n


def _fold_line(fold: _Fold, run: MllogRun, key: str, rec: dict, t: float, meta: dict) -> None:
    epoch = _whole(meta.get("epoch_num"), 0, MAX_EPOCH_NUM)
    if epoch is None and meta.get("epoch_num") is not None:
        fold.bad_numbers += 1
        return
    if key == "run_start":
        fold.run_start = t if fold.run_start is None else fold.run_start
    elif key == "run_stop" and not run.stopped:
        fold.run_stop, run.stopped = t, True
        status = meta.get("status")
        run.status = status if isinstance(status, str) else None
        if status is not None and not isinstance(status, str):
            run.notes.append(f"MLLOG run_stop status {repr(status)[:60]} is not a string: not read")
    elif key in ("epoch_start", "epoch_stop") and epoch is not None:
        (fold.starts if key == "epoch_start" else fold.stops).setdefault(epoch, t)
        if key == "epoch_stop" and (n := _samples(fold, meta.get("samples_count"))) is not None:
            fold.samples.setdefault(epoch, n)
    elif key in ("block_start", "block_stop"):
        _fold_block(fold, key, t, meta)
    elif key == "samples_count" and epoch is not None:
        if (n := _samples(fold, rec.get("value"))) is not None:
            fold.samples.setdefault(epoch, n)
    elif key == "train_samples" and fold.train_samples is None:
        fold.train_samples = _samples(fold, rec.get("value"))
    elif key == "global_batch_size" and fold.global_batch is None:
        fold.global_batch = _samples(fold, rec.get("value"))
    elif key == "step_time_ms" and epoch is not None and isinstance(rec.get("value"), dict):
        fold.steps.setdefault(epoch, rec["value"])
    elif rec.get("event_type") == "POINT_IN_TIME" and key not in _NOT_SERIES:
        raw = rec.get("value")
        value = _float(raw, finite=False)  # a diverged NaN loss is a figure
        if value is None and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            fold.bad_numbers += 1  # a number no float holds
        elif value is not None:
            name = RENAMES.get(key, key)
            if epoch is None:
                fold.unnumbered.setdefault(name, []).append(value)
            else:
                fold.points.setdefault(name, {}).setdefault(epoch, value)


def _fold_block(fold: _Fold, key: str, t: float, meta: dict) -> None:
    first = _whole(meta.get("first_epoch_num"), 0, MAX_EPOCH_NUM)
    count = meta.get("epoch_count")
    k = _whole(count, 1, MAX_BLOCK_EPOCHS)
    if first is None or (count is not None and k is None):
        fold.bad_numbers += 1
        return
    block = fold.blocks.setdefault(first, _Block())
    if key == "block_start":
        block.start = t if block.start is None else block.start
    elif block.stop is None:
        block.stop = t
        block.samples = _samples(fold, meta.get("samples_count"))
    if block.count is None:
        block.count = k


def read_mllog(lines: Iterable[str]) -> MllogRun:
    """Fold a log's MLLOG lines into one run. Lines of several ranks (a log of every rank) are
    fine: the first value of a key for an epoch wins, as rank 0's prints first."""
    run = MllogRun()
    fold = _Fold()
    for key, rec, t, meta in _records(lines, run):
        _fold_line(fold, run, key, rec, t, meta)
    if run.bad_lines:
        run.notes.append(f"{run.bad_lines} of {run.lines} MLLOG lines unreadable: skipped")
    if fold.bad_numbers:
        run.notes.append(
            f"{fold.bad_numbers} MLLOG lines with an epoch_num, first_epoch_num, epoch_count, "
            "samples_count or value that is not a valid number: skipped"
        )
    samples = _timed_epochs(fold, run) if fold.starts or fold.stops else {}
    if not run.epochs and fold.blocks:
        samples = _timed_blocks(fold, run)
    elif fold.blocks:  # block times alongside the epochs they cover
        run.block_time_s = _block_times(fold)
    _epoch_samples(fold, run, samples)
    run.step_p50_ms = [
        float(p) if (p := _float(fold.steps.get(e, {}).get("p50_ms"))) is not None else math.nan
        for e in run.epochs
    ]
    _series(fold, run)
    if fold.run_start is not None and fold.run_stop is not None:
        run.fit_time_s = (fold.run_stop - fold.run_start) / 1e3
    return run


def _timed_epochs(fold: _Fold, run: MllogRun) -> dict[int, float]:
    starts, stops = fold.starts, fold.stops
    unmatched = sorted(set(starts) ^ set(stops))
    if unmatched:
        run.notes.append(
            f"epochs {unmatched[:20]} have a start without a stop or a stop without a start: "
            "left out"
        )
    both = sorted(set(starts) & set(stops))
    backwards = [e for e in both if stops[e] < starts[e]]
    if backwards:
        run.notes.append(f"epochs {backwards[:20]} stop before they start: left out")
    run.epochs = [e for e in both if stops[e] >= starts[e]]
    run.epoch_time_s = [(stops[e] - starts[e]) / 1e3 for e in run.epochs]
    return {e: fold.samples[e] for e in run.epochs if e in fold.samples}


def _block_times(fold: _Fold) -> list[float]:
    return [
        (b.stop - b.start) / 1e3
        for _, b in sorted(fold.blocks.items())
        if b.start is not None and b.stop is not None and b.stop >= b.start
    ]


def _timed_blocks(fold: _Fold, run: MllogRun) -> dict[int, float]:
    """Epochs from the blocks (a log without epoch_start/epoch_stop): each block's epochs get
    its mean time and, when block_stop says them, its samples shared evenly."""
    run.block_time_s = _block_times(fold)
    samples: dict[int, float] = {}
    left, covered = [], -1
    whole = sum((b.count or 1) for b in fold.blocks.values()) <= MAX_BLOCK_EPOCHS
    for first, b in sorted(fold.blocks.items()):
        if b.start is None or b.stop is None or b.stop < b.start or first <= covered:
            left.append(first)
            continue
        k = (b.count or 1) if whole else 1
        covered = first + k - 1
        for e in range(first, first + k):
            run.epochs.append(e)
            run.epoch_time_s.append((b.stop - b.start) / 1e3 / k)
            if b.samples is not None:
                samples[e] = b.samples / k
            elif k == 1 and first in fold.samples:
                samples[e] = fold.samples[first]
    if left:
        run.notes.append(
            f"blocks at first_epoch_num {left[:20]} lack a start or a stop, stop before they "
            "start, or overlap another: left out"
        )
    if not whole:
        run.notes.append(f"blocks span more than {MAX_BLOCK_EPOCHS} epochs: each counted as one")
    return samples


def _epoch_samples(fold: _Fold, run: MllogRun, samples: dict[int, float]) -> None:
    for e in run.epochs:
        steps = _whole(fold.steps.get(e, {}).get("count"), 0, int(MAX_COUNT))
        if e in samples:
            run.epoch_samples.append(samples[e])
        elif fold.train_samples is not None:
            run.epoch_samples.append(fold.train_samples)
        elif fold.global_batch is not None and steps is not None:
            run.epoch_samples.append(fold.global_batch * steps)
        else:
            run.epoch_samples.append(math.nan)
    if run.epochs and any(math.isnan(s) for s in run.epoch_samples):
        run.notes.append(
            "no samples_count, train_samples or global_batch_size x steps for every epoch: "
            "no throughput"
        )


def _series(fold: _Fold, run: MllogRun) -> None:
    """Each series per epoch number, counted from the log's first epoch number (0- and 1-based
    logs both occur), so a value whose epoch no timed epoch has is kept at its own number; one
    past MAX_AXIS epochs from the first is named in the notes, never dropped silently."""
    numbers = set(run.epochs).union(*(set(p) for p in fold.points.values()))
    base = min(numbers, default=0)
    last_timed = min(max(run.epochs, default=base), base + MAX_AXIS - 1)
    for name, per_epoch in fold.points.items():
        far = sorted(e for e in per_epoch if e - base >= MAX_AXIS)
        if far:
            run.notes.append(
                f"{name} logged at epoch_num {far[:5]}{'...' if len(far) > 5 else ''}, over "
                f"{MAX_AXIS} epochs past the first ({base}): not drawn"
            )
        near = [e for e in per_epoch if e - base < MAX_AXIS]
        if near:
            values = [math.nan] * (max(*near, last_timed) - base + 1)
            for e in near:
                values[e - base] = per_epoch[e]
            run.series[name] = values
    for name, values in fold.unnumbered.items():
        if name in run.series:
            run.notes.append(
                f"{len(values)} {name} values without an epoch_num beside numbered ones: not drawn"
            )
        else:
            run.series[name] = values
