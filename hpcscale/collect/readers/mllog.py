"""MLPerf logging lines (`:::MLLOG {json}`) -> per-epoch times, throughput and series.

The format of the mlperf-logging package (and of `hpcscale.probe`), read without that package:
each line holds `time_ms`, `event_type` (INTERVAL_START, INTERVAL_END, POINT_IN_TIME), `key`,
`value` and `metadata` (`epoch_num`, `samples_count`, `status`, ...). Epoch times come from
`epoch_start`/`epoch_stop` pairs; the samples of an epoch from `samples_count` (the stop's
metadata or a point event), else `train_samples`, else `global_batch_size` x the epoch's steps.
A figure the lines cannot support is left out and said, never guessed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

MARKER = ":::MLLOG"
# Keys that are bookkeeping, not series to draw.
_NOT_SERIES = frozenset(
    {"samples_count", "train_samples", "eval_samples", "global_batch_size", "step_time_ms"}
)
# MLPerf's names -> the tidy table's.
RENAMES = {"eval_accuracy": "val_accuracy"}


@dataclass
class MllogRun:
    """What one log says. Lists are ordered by epoch number."""

    epochs: list[int] = field(default_factory=list)
    epoch_time_s: list[float] = field(default_factory=list)
    epoch_samples: list[float] = field(default_factory=list)  # NaN where unknown
    series: dict[str, list[float]] = field(default_factory=dict)  # aligned with `epochs`
    step_p50_ms: list[float] = field(default_factory=list)  # per epoch, NaN where unknown
    fit_time_s: float = math.nan
    status: str | None = None
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


def _records(lines: Iterable[str], run: MllogRun) -> Iterable[dict[str, Any]]:
    for line in lines:
        at = line.find(MARKER)
        if at < 0:
            continue
        run.lines += 1
        try:
            rec = json.loads(line[at + len(MARKER) :])
        except ValueError:
            run.bad_lines += 1
            continue
        if isinstance(rec, dict) and "key" in rec and "time_ms" in rec:
            yield rec
        else:
            run.bad_lines += 1


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def read_mllog(lines: Iterable[str]) -> MllogRun:
    """Fold a log's MLLOG lines into one run. Lines of several ranks (a log of every rank) are
    fine: the first value of a key for an epoch wins, as rank 0's prints first."""
    run = MllogRun()
    starts: dict[int, float] = {}
    stops: dict[int, float] = {}
    samples: dict[int, float] = {}
    steps: dict[int, dict[str, Any]] = {}
    points: dict[str, dict[int | None, list[float]]] = {}
    run_start = run_stop = None
    train_samples = global_batch = None
    for rec in _records(lines, run):
        key, kind = str(rec["key"]), rec.get("event_type")
        meta = rec.get("metadata") or {}
        t = _number(rec.get("time_ms"))
        epoch_num = _number(meta.get("epoch_num"))
        epoch = None if epoch_num is None else int(epoch_num)
        if t is None:
            run.bad_lines += 1
            continue
        if key == "run_start" and run_start is None:
            run_start = t
        elif key == "run_stop" and run_stop is None:
            run_stop = t
            run.status = meta.get("status") if isinstance(meta.get("status"), str) else None
        elif key == "epoch_start" and epoch is not None:
            starts.setdefault(epoch, t)
        elif key == "epoch_stop" and epoch is not None:
            stops.setdefault(epoch, t)
            n = _number(meta.get("samples_count"))
            if n is not None:
                samples.setdefault(epoch, n)
        elif key == "samples_count" and epoch is not None and _number(rec.get("value")) is not None:
            samples.setdefault(epoch, float(rec["value"]))
        elif key == "train_samples" and train_samples is None:
            train_samples = _number(rec.get("value"))
        elif key == "global_batch_size" and global_batch is None:
            global_batch = _number(rec.get("value"))
        elif key == "step_time_ms" and epoch is not None and isinstance(rec.get("value"), dict):
            steps.setdefault(epoch, rec["value"])
        elif kind == "POINT_IN_TIME" and key not in _NOT_SERIES:
            value = _number(rec.get("value"))
            if value is not None:
                per_epoch = points.setdefault(RENAMES.get(key, key), {})
                if epoch is None:
                    per_epoch.setdefault(None, []).append(value)
                elif epoch not in per_epoch:
                    per_epoch[epoch] = [value]
    unmatched = sorted(set(starts) ^ set(stops))
    if unmatched:
        run.notes.append(
            f"epochs {unmatched} have a start without a stop or a stop without a start: left out"
        )
    run.epochs = sorted(e for e in set(starts) & set(stops) if stops[e] >= starts[e])
    run.epoch_time_s = [(stops[e] - starts[e]) / 1e3 for e in run.epochs]
    for e in run.epochs:
        if e in samples:
            run.epoch_samples.append(samples[e])
        elif train_samples is not None:
            run.epoch_samples.append(train_samples)
        elif global_batch is not None and isinstance(steps.get(e, {}).get("count"), int):
            run.epoch_samples.append(global_batch * steps[e]["count"])
        else:
            run.epoch_samples.append(math.nan)
    if run.epochs and any(math.isnan(s) for s in run.epoch_samples):
        run.notes.append(
            "no samples_count, train_samples or global_batch_size x steps for every epoch: "
            "no throughput"
        )
    run.step_p50_ms = [
        float(steps[e]["p50_ms"])
        if _number(steps.get(e, {}).get("p50_ms")) is not None
        else math.nan
        for e in run.epochs
    ]
    for name, per_epoch in points.items():
        if set(per_epoch) == {None}:
            run.series[name] = per_epoch[None]
        else:
            run.series[name] = [per_epoch[e][0] if e in per_epoch else math.nan for e in run.epochs]
    if run_start is not None and run_stop is not None:
        run.fit_time_s = (run_stop - run_start) / 1e3
    return run
