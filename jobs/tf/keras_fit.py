"""The Keras-fit training path (`model: classifier`): the code a user of Horovod's Keras API
writes, i.e. `model.compile(hvd.DistributedOptimizer(opt))` and `model.fit` with
`BroadcastGlobalVariablesCallback(0)`, `MetricAverageCallback` and `LearningRateWarmupCallback`,
measured exactly like the harness' custom loop through two more callbacks:

- `StepTimer` times each batch on the monotonic clock into the same `StepLog` (steps.json) and
  each epoch from its start to its last batch's end (rank 0's wall and CPU time);
- `EpochReport` takes the epoch's training loss and accuracy (Keras' means over the epoch's
  steps, averaged over ranks by MetricAverageCallback, which runs before it), validates over the
  held-out split (jobs/tf/evaluation.py: after the timed steps, its own `val_time_s`) and prints
  the harness' "[hpcscale] epoch ..." line.

The harness (jobs/tf/harness.py) sets up the context, data, timeline and writes the outputs; this
module only trains. Burn-in steps are a separate one-epoch `fit` before the timed ones. With
--fine-tune, the head trains on a frozen backbone for --head-epochs, then the model is compiled
again (a fresh optimizer at the rate x --fine-tune-lr-factor) with the top --unfreeze-layers
backbone layers trainable, and `fit` continues from that epoch.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Optional

import tensorflow as tf

from jobs.steps import StepLog
from jobs.tf.augment import augmentation_of, augmented
from jobs.tf.config import JobConfig, JobUsageError, lr_scale, ref_batch_of
from jobs.tf.distribute import DistContext
from jobs.tf.evaluation import HeldOut, epoch_line, for_keras
from jobs.tf.models.classifier import DEFAULT_LR, build_model, optimizer, set_trainable
from jobs.tf.workload import Workload

# (workload, step log, burn-in seconds, (epoch wall s, epoch CPU s), history, before_timed())
Trained = tuple[
    Workload, StepLog, float, tuple[list[float], list[float]], dict[str, list[float]], Any
]


class StepTimer(tf.keras.callbacks.Callback):
    """Each batch's start and end (monotonic ns) and each epoch's wall and CPU time."""

    def __init__(self, log: StepLog) -> None:
        super().__init__()
        self.log = log
        self.burn_in = False
        self.epoch_times: list[float] = []
        self.epoch_cpu: list[float] = []
        self.epoch = 0
        self._start = self._e0 = self._end = 0
        self._c0 = self._cpu = 0.0

    def on_epoch_begin(self, epoch: int, logs: Optional[dict[str, Any]] = None) -> None:
        self.epoch = epoch
        self._e0, self._c0 = time.monotonic_ns(), time.process_time()

    def on_train_batch_begin(self, batch: int, logs: Optional[dict[str, Any]] = None) -> None:
        self._start = time.monotonic_ns()

    def on_train_batch_end(self, batch: int, logs: Optional[dict[str, Any]] = None) -> None:
        self._end, self._cpu = time.monotonic_ns(), time.process_time()
        if self.burn_in:
            self.log.burn_in(self._start, self._end)
        else:
            self.log.add(self.epoch, batch, self._start, self._end)

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, Any]] = None) -> None:
        if not self.burn_in:
            self.epoch_times.append((self._end - self._e0) / 1e9)
            self.epoch_cpu.append(self._cpu - self._c0)


class EpochReport(tf.keras.callbacks.Callback):
    """Training means (already averaged over ranks), validation, the progress line."""

    def __init__(
        self, cfg: JobConfig, ctx: DistContext, timer: StepTimer, held_out: Optional[HeldOut]
    ) -> None:
        super().__init__()
        self.cfg, self.ctx, self.timer, self.held_out = cfg, ctx, timer, held_out
        self.history: dict[str, list[float]] = defaultdict(list)

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, Any]] = None) -> None:
        logs = logs or {}
        values = {"loss": float(logs["loss"]), "accuracy": float(logs["accuracy"])}
        if self.held_out is not None:
            values.update(self.held_out())
        for k, v in values.items():
            self.history[k].append(v)
        if self.ctx.rank == 0:
            t = self.timer.epoch_times[-1]
            ips = self.ctx.global_batch * self.ctx.steps_per_epoch / t
            print(f"[hpcscale] {epoch_line(epoch, self.cfg.epochs, t, ips, values)}", flush=True)


def effective_lr(cfg: JobConfig, global_batch: int) -> float:
    """--lr (or the classifier's default) under the shared --lr-scaling rule."""
    base = cfg.lr if cfg.lr is not None else DEFAULT_LR
    return base * lr_scale(cfg.lr_scaling, global_batch, ref_batch_of(cfg))


def phases(cfg: JobConfig, rate: float) -> list[tuple[int, int, float, bool]]:
    """(first epoch, end epoch, learning rate, backbone frozen) of each `fit`."""
    if not cfg.fine_tune:
        return [(0, cfg.epochs, rate, False)]
    head = cfg.epochs // 2 if cfg.head_epochs is None else cfg.head_epochs
    if head > cfg.epochs:
        raise JobUsageError(f"--head-epochs {head}: more than --epochs {cfg.epochs}")
    return [(0, head, rate, True), (head, cfg.epochs, rate * cfg.fine_tune_lr_factor, False)]


def train(
    cfg: JobConfig, ctx: DistContext, data: Any, before_timed: Callable[[], Any] = lambda: None
) -> Trained:
    """Build, compile and `fit` the classifier on this rank; what the harness writes out.
    `before_timed` runs (on every rank) after the burn-in, before the first timed epoch."""
    if ctx.strategy_name != "horovod":
        raise JobUsageError(
            "--model classifier trains with Horovod's Keras API (one process per rank under "
            "mpirun/srun): use --strategy horovod"
        )
    import horovod.tensorflow.keras as hvd

    num_classes = getattr(data, "num_classes", None) or cfg.num_classes or 10
    rate = effective_lr(cfg, ctx.global_batch)
    plan = phases(cfg, rate)
    model, backbone = build_model(cfg, num_classes)
    aug = augmentation_of(cfg)
    train_ds = augmented(data.dataset, aug, cfg.seed + ctx.rank)
    compression = hvd.Compression.fp16 if cfg.fp16_allreduce else hvd.Compression.none
    log = StepLog()
    timer = StepTimer(log)
    report = EpochReport(cfg, ctx, timer, for_keras(ctx, data, model))
    broadcast: Any = hvd.callbacks.BroadcastGlobalVariablesCallback(0)
    if ctx.rank == 0:
        print(
            f"[hpcscale] classifier backbone={cfg.backbone} weights={cfg.weights} "
            f"classes={num_classes} optimizer={cfg.optimizer} lr={rate:g} "
            f"augment={aug.describe()} phases={[(a, b, f'{r:g}', f) for a, b, r, f in plan]}",
            flush=True,
        )
    opt: Any = None
    burn_in_s = 0.0
    before: Any = None
    first_fit = True
    for first, end, lr, frozen in plan:
        if end <= first:
            continue
        set_trainable(backbone, cfg.unfreeze_layers, frozen)
        opt = hvd.DistributedOptimizer(optimizer(cfg.optimizer, lr), compression=compression)
        model.compile(
            optimizer=opt,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        if cfg.burn_in_steps and broadcast is not None:  # untimed: graph tracing, broadcast
            t0 = time.monotonic()
            timer.burn_in = True
            model.fit(train_ds, epochs=1, steps_per_epoch=cfg.burn_in_steps,
                      callbacks=[timer, broadcast], verbose=0)  # fmt: skip
            timer.burn_in, broadcast = False, None
            burn_in_s = time.monotonic() - t0
        if first_fit:
            before = before_timed()
        callbacks = [timer, broadcast, hvd.callbacks.MetricAverageCallback()]
        if first_fit and cfg.warmup_epochs > 0:
            callbacks.append(
                hvd.callbacks.LearningRateWarmupCallback(
                    initial_lr=lr,
                    warmup_epochs=cfg.warmup_epochs,
                    steps_per_epoch=data.steps_per_epoch,
                )
            )
        callbacks.append(report)
        model.fit(
            train_ds,
            initial_epoch=first,
            epochs=end,
            steps_per_epoch=data.steps_per_epoch,
            callbacks=[c for c in callbacks if c is not None],
            verbose=0,
        )
        broadcast, first_fit = None, False
    if opt is None:
        raise JobUsageError("--epochs 0: nothing to train")
    wl = Workload([model], {model.name: opt}, lambda batch: {})
    clocks = (timer.epoch_times, timer.epoch_cpu)
    return wl, log, burn_in_s, clocks, dict(report.history), before
