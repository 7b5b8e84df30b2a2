"""A drop-in for training scripts that print nothing hpcscale can read: MLPerf-style log lines.

    from hpcscale import probe
    for epoch in range(epochs):
        with probe.epoch(epoch, samples=images_per_epoch):
            for batch in data:
                with probe.step():
                    train_step(batch)
        probe.log(epoch, loss=float(loss), val_accuracy=acc)

Each call writes `:::MLLOG {json}` lines (the mlperf-logging format, read by `metrics: mllog`) on
rank 0 only. The rank comes from the launcher's environment (the variables
hpcscale.model.registry.RANK_ENV names), so nothing here imports a framework, MPI or anything
beyond the standard library: the probe must cost the program it observes nothing but a clock
read per step. `probe.step()` keeps step times in memory and writes one summary per epoch, never
a line per step.

Under a traced run (`collect: {timeline: true}` on a `framework: torch` command: the per-rank
wrapper's bootstrap, hpcscale/rankwrap_boot/sitecustomize.py, starts torch.profiler in the
program) `probe.step()` also marks the step for the trace: the end of each marked step steps the
profiler (one `ProfilerStep#N` span per marked step, the trace window counted in the program's
own steps), and the optimizer's steps no longer do. The probe never imports torch: the bootstrap
already holds it, and a run that is not traced pays nothing more.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from hpcscale.model.registry import RANK_ENV

# Launchers' rank and size variables, the innermost launcher first (the registry's order; see
# there why)
RANK_VARIABLES = tuple(env.rank for env in RANK_ENV.values())
SIZE_VARIABLES = tuple(name for env in RANK_ENV.values() for name in env.size)
# The trace bootstrap's module name (hpcscale/rankwrap_boot/sitecustomize.py, NAME there)
TRACE_BOOT = "_hpcscale_trace_boot"
# The key of the per-epoch step-time summary (value: count, p50_ms, p90_ms, p99_ms).
STEP_SUMMARY_KEY = "step_time_ms"
PREFIX = ":::MLLOG "

__all__ = ["KerasCallback", "epoch", "event", "log", "rank", "run_stop", "step", "world_size"]


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return default


def rank() -> int:
    """This process's rank as its launcher set it (0 when started without one)."""
    return _env_int(RANK_VARIABLES, 0)


def world_size() -> int:
    """The number of ranks as the launcher set it (1 without one)."""
    return _env_int(SIZE_VARIABLES, 1)


class _Probe:
    """The process's one emitter; state lives here so the module functions stay thin."""

    def __init__(self) -> None:
        self.stream: TextIO | None = None
        self.enabled = rank() == 0
        self.started = False
        self.stopped = False
        self.failed = False
        self.steps_ns: list[int] = []
        self.epoch_num: int | None = None

    def emit(
        self,
        event_type: str,
        key: str,
        value: Any = None,
        metadata: dict | None = None,
    ) -> None:
        if not self.enabled:
            return
        if not self.started and key != "run_start":
            self.started = True
            self.emit("INTERVAL_START", "run_start")
        if key == "run_start":
            self.started = True
        record = {
            "namespace": "",
            "time_ms": time.time() * 1e3,
            "event_type": event_type,
            "key": key,
            "value": value,
            "metadata": metadata or {},
        }
        out = self.stream or sys.stdout
        out.write(PREFIX + json.dumps(record, default=_jsonable) + "\n")
        out.flush()

    def step_summary(self, epoch_num: int) -> None:
        times = self.steps_ns
        self.steps_ns = []
        if not times:
            return
        times.sort()
        summary = {
            "count": len(times),
            "p50_ms": _quantile(times, 0.50) / 1e6,
            "p90_ms": _quantile(times, 0.90) / 1e6,
            "p99_ms": _quantile(times, 0.99) / 1e6,
        }
        self.emit("POINT_IN_TIME", STEP_SUMMARY_KEY, summary, {"epoch_num": epoch_num})


def _quantile(sorted_ns: list[int], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), without numpy."""
    pos = q * (len(sorted_ns) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_ns) - 1)
    return sorted_ns[lo] + (sorted_ns[hi] - sorted_ns[lo]) * (pos - lo)


def _jsonable(value: Any) -> Any:
    """NumPy scalars and tensors with .item()/float(): written as plain numbers."""
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return float(value)


_PROBE = _Probe()


@contextmanager
def epoch(epoch_num: int, samples: int | None = None) -> Iterator[None]:
    """Times one epoch: `epoch_start` and `epoch_stop` lines around the block. `samples` is the
    number of samples the whole job (every rank together) trained on in it."""
    meta = {"epoch_num": int(epoch_num)}
    _PROBE.steps_ns = []
    _PROBE.epoch_num = int(epoch_num)
    _PROBE.emit("INTERVAL_START", "epoch_start", None, meta)
    try:
        yield
    finally:
        stop_meta = dict(meta)
        if samples is not None:
            stop_meta["samples_count"] = int(samples)
        _PROBE.emit("INTERVAL_END", "epoch_stop", None, stop_meta)
        _PROBE.step_summary(int(epoch_num))
        _PROBE.epoch_num = None


class _Step:
    """A reusable context manager: two clock reads and an append, nothing else per step."""

    __slots__ = ("t0",)

    def __enter__(self) -> None:
        self.t0 = time.perf_counter_ns()

    def __exit__(self, *exc: object) -> None:
        _PROBE.steps_ns.append(time.perf_counter_ns() - self.t0)


class _TracedStep(_Step):
    """A step that the run's profiler counts too: the bootstrap takes the program's marks as
    its clock (its optimizer hook then stops counting) and steps the profiler at each end."""

    __slots__ = ("begin", "end")

    def __init__(self, boot: Any) -> None:
        self.begin = boot.user_step_begin
        self.end = boot.user_step_end

    def __enter__(self) -> None:
        self.begin()
        self.t0 = time.perf_counter_ns()

    def __exit__(self, *exc: object) -> None:
        _PROBE.steps_ns.append(time.perf_counter_ns() - self.t0)
        self.end()


def _trace_boot() -> Any:
    """The trace bootstrap when this process is traced (it runs at start-up, before any
    import of the program's), else None."""
    boot = sys.modules.get(TRACE_BOOT)
    if boot is None or getattr(boot, "STATE", None) is None:
        return None
    if not hasattr(boot, "user_step_end"):  # an older bootstrap: its optimizer hook counts
        return None
    return boot


_BOOT = _trace_boot()
_STEP: _Step = _Step() if _BOOT is None else _TracedStep(_BOOT)


def step() -> _Step:
    """Times one training step (kept in memory; summarised at the epoch's end)."""
    return _STEP


def log(epoch_num: int | None = None, **values: Any) -> None:
    """One POINT_IN_TIME line per value (`loss=...`, `val_accuracy=...`), tagged with the epoch
    so the report can draw learning curves."""
    meta = {} if epoch_num is None else {"epoch_num": int(epoch_num)}
    for key, value in values.items():
        _PROBE.emit("POINT_IN_TIME", key, value, meta)


def event(key: str, value: Any = None, **metadata: Any) -> None:
    """Any other MLLOG point-in-time event (e.g. `global_batch_size`)."""
    _PROBE.emit("POINT_IN_TIME", key, value, metadata)


def run_stop(status: str = "success") -> None:
    """Ends the run (`run_stop` with `status`); called at exit when the script does not."""
    if _PROBE.stopped or not _PROBE.started:
        return
    _PROBE.stopped = True
    _PROBE.emit("INTERVAL_END", "run_stop", None, {"status": status})


def _on_exit() -> None:
    run_stop("aborted" if _PROBE.failed else "success")


_previous_hook = sys.excepthook


def _excepthook(*args: Any) -> None:
    _PROBE.failed = True
    _previous_hook(*args)


sys.excepthook = _excepthook
atexit.register(_on_exit)


def KerasCallback(batch_size: int, world: int | None = None) -> Any:
    """A `tf.keras.callbacks.Callback` that writes the same lines from `model.fit`: epochs,
    step times and the epoch's logs (loss -> train_loss, accuracy -> train_accuracy, val_*).
    `batch_size` is the per-rank batch; samples per epoch = batch_size x steps x ranks.
    TensorFlow is imported here, when the callback is created, never by `import probe`."""
    import tensorflow as tf

    ranks = world if world is not None else world_size()
    renames = {"loss": "train_loss", "accuracy": "train_accuracy", "acc": "train_accuracy"}

    class _Callback(tf.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self._steps = 0

        def on_epoch_begin(self, epoch_num: int, logs: dict | None = None) -> None:
            self._steps = 0
            _PROBE.steps_ns = []
            _PROBE.emit("INTERVAL_START", "epoch_start", None, {"epoch_num": int(epoch_num)})

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            _STEP.__enter__()

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            _STEP.__exit__()
            self._steps += 1

        def on_epoch_end(self, epoch_num: int, logs: dict | None = None) -> None:
            samples = int(batch_size) * self._steps * ranks
            _PROBE.emit(
                "INTERVAL_END",
                "epoch_stop",
                None,
                {"epoch_num": int(epoch_num), "samples_count": samples},
            )
            _PROBE.step_summary(int(epoch_num))
            values = {renames.get(k, k): float(v) for k, v in (logs or {}).items()}
            values.pop("lr", None)
            values.pop("learning_rate", None)
            log(epoch_num, **values)

    return _Callback()
