"""The shared training harness: every model runs through `run(cfg)`.

Order of events (each rank): arm the Horovod timeline (env, before hvd.init) -> distribution
context (threads, devices, hvd.init or MirroredStrategy) -> seed (seed + rank) -> input pipeline
(jobs/tf/datasets; its own throughput measured untimed, on an iterator of its own) -> the model
file builds networks, optimizers and its train step -> rank 0's variables are
broadcast -> `--burn-in-steps` untimed steps (graph tracing) -> the machine's load (jobs/load.py;
again after the epochs) -> `--epochs` timed epochs of `steps_per_epoch` steps -> batch-norm
statistics averaged over ranks -> optional weight check ->
hvd.shutdown() -> rank 0 writes timeline.json (copied), steps.json and last metrics.json
(formats: hpcscale/formats/), each atomically and durably.

Measurements follow the seed studies: epoch wall time on rank 0; images/s =
global_batch * steps_per_epoch / epoch time (all ranks' images); fit time = sum of epoch times;
epoch CPU time = rank 0's process CPU seconds (all its threads) during the epoch;
losses (and accuracy) = the mean over the epoch's steps, averaged over ranks, written as
train_loss/train_accuracy for CNNs; with a held-out split, validation (jobs/tf/evaluation.py) after
each epoch's timed steps. `model: classifier` trains with Keras `fit` instead of the loop
(jobs/tf/keras_fit.py), between the same set-up and the same outputs (`_finish`).

Rank 0 prints one line per epoch, stable for progress displays:
    [hpcscale] epoch 2/5 time_s=12.345 images_per_s=678.9 d_loss=0.6931 g_loss=0.7012
"""

from __future__ import annotations

import dataclasses
import random
import socket
import sys
import time
from collections import defaultdict
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from hpcscale.formats.atomic import atomic_write
from hpcscale.formats.metrics import SCHEMA_VERSION as METRICS_SCHEMA_VERSION
from hpcscale.formats.metrics import encode_metrics, metrics_from_dict
from hpcscale.formats.steps import encode_steps
from jobs.load import machine_id
from jobs.load import sample as load_sample
from jobs.provenance import provenance
from jobs.steps import StepLog, step_time_summary
from jobs.tf.compat import keras_version, optimizer_variables
from jobs.tf.config import JobConfig, JobUsageError, lr_scale, ref_batch_of
from jobs.tf.datasets import make_data
from jobs.tf.distribute import DistContext, make_context
from jobs.tf.evaluation import VAL_KEYS, for_network
from jobs.tf.keras_fit import Trained
from jobs.tf.keras_fit import train as keras_fit
from jobs.tf.models import module_of
from jobs.tf.samples import write_grids
from jobs.tf.timeline import TimelineSwitch

EXIT_SYNC_MISMATCH = 3


def log0(ctx: DistContext, msg: str) -> None:
    if ctx.rank == 0:
        print(f"[hpcscale] {msg}", flush=True)


def run(cfg: JobConfig) -> int:
    """Train and write the outputs; the process exit code."""
    started = time.time()
    switch = TimelineSwitch(cfg.timeline, cfg.mark_cycles, cfg.timeline_dir)
    switch.arm()
    try:
        return _run(cfg, started, switch)
    finally:
        switch.cleanup()


def _run(cfg: JobConfig, started: float, switch: TimelineSwitch) -> int:
    ctx = make_context(cfg)
    if cfg.debug_desync and ctx.size < 2:
        raise JobUsageError("--debug-desync needs at least 2 Horovod ranks")
    ctx.global_batch = cfg.batch_per_rank * ctx.replicas
    process_batch = cfg.batch_per_rank if ctx.strategy_name == "horovod" else ctx.global_batch
    _seed(cfg.seed + ctx.rank)
    data = make_data(cfg, ctx.rank, ctx.size, ctx.global_batch, process_batch)
    if cfg.num_classes is None:  # from the data (synthetic: 10)
        cfg = dataclasses.replace(cfg, num_classes=data.num_classes)
    ctx.steps_per_epoch = data.steps_per_epoch
    log0(
        ctx,
        f"model={cfg.model} strategy={ctx.strategy_name} ranks={ctx.size} "
        f"replicas={ctx.replicas} global_batch={ctx.global_batch} "
        f"steps_per_epoch={data.steps_per_epoch} data={data.description}",
    )
    if cfg.model == "classifier":  # Keras model.fit + Horovod's Keras API (jobs/tf/keras_fit.py)
        trained = keras_fit(cfg, ctx, data, lambda: load_sample(ctx.allgather_object, ctx.rank))
        return _finish(cfg, ctx, data, switch, started, trained)

    with ctx.scope():
        wl = module_of(cfg.model).build(cfg, ctx)
    ctx.prepare(wl.networks, wl.optimizers)
    step = ctx.compile_step(wl.train_step)
    batches = iter(ctx.distribute(data.dataset))
    if wl.pretrain is not None:  # untimed, before burn-in (StackGAN stage 2: Stage-I first)
        wl.pretrain(batches)
    log = StepLog()

    t0 = time.monotonic()
    for _ in range(cfg.burn_in_steps):
        s = time.monotonic_ns()
        ctx.step_values(step(next(batches)))
        log.burn_in(s, time.monotonic_ns())
    burn_in_s = time.monotonic() - t0

    # the machine's load before the timed epochs
    load_start = load_sample(ctx.allgather_object, ctx.rank)
    epoch_times: list[float] = []
    epoch_cpu: list[float] = []
    history: dict[str, list[float]] = defaultdict(list)
    held_out = for_network(ctx, data, wl.networks[0]) if cfg.workload == "cnn" else None
    for epoch in range(cfg.epochs):
        sums: dict[str, float] = defaultdict(float)
        e0, c0 = time.monotonic_ns(), time.process_time()
        for i in range(data.steps_per_epoch):
            s = time.monotonic_ns()
            values = ctx.step_values(step(next(batches)))
            log.add(epoch, i, s, time.monotonic_ns())
            for k, v in values.items():
                sums[k] += v
        epoch_times.append((time.monotonic_ns() - e0) / 1e9)
        epoch_cpu.append(time.process_time() - c0)
        means = ctx.average_across({k: v / data.steps_per_epoch for k, v in sums.items()})
        if held_out is not None:  # after the timed steps, with its own val_time_s
            means.update(held_out())
        for k, v in means.items():
            history[k].append(v)
        ips = ctx.global_batch * data.steps_per_epoch / epoch_times[-1]
        shown = " ".join(f"{k}={v:.4f}" for k, v in sorted(means.items()))
        log0(
            ctx,
            f"epoch {epoch + 1}/{cfg.epochs} time_s={epoch_times[-1]:.3f} "
            f"images_per_s={ips:.1f} {shown}",
        )
        if wl.samples is not None and ctx.rank == 0:  # after the epoch's clock, local forward
            write_grids(cfg.run_dir, epoch + 1, wl.samples())

    trained = (wl, log, burn_in_s, (epoch_times, epoch_cpu), dict(history), load_start)
    return _finish(cfg, ctx, data, switch, started, trained)


def _finish(
    cfg: JobConfig, ctx: DistContext, data: Any, switch: TimelineSwitch, started: float,
    trained: Trained,
) -> int:  # fmt: skip
    """After training, the same for every path: local state, sync check, outputs."""
    wl, log, burn_in_s, (epoch_times, epoch_cpu), history, load_start = trained
    ctx.sync_local_state(wl.networks)
    if wl.save is not None and ctx.rank == 0:
        wl.save(cfg.run_dir)
    sync = _check_sync(cfg, ctx, wl) if cfg.check_sync or cfg.debug_desync else None
    hostnames = ctx.allgather_object(socket.gethostname())
    machines = ctx.allgather_object(machine_id())
    load_end = load_sample(ctx.allgather_object, ctx.rank)
    load = {"machines": machines, "start": load_start, "end": load_end}
    ctx.shutdown()

    if ctx.rank == 0:
        _write_outputs(cfg, ctx, wl, data, log, switch, started, burn_in_s,
                       (epoch_times, epoch_cpu), dict(history), hostnames, sync, load)  # fmt: skip
    if sync is not None and not sync["identical"]:
        if ctx.rank == 0:
            print(
                "train.py: error: weights differ across ranks after training: "
                + ", ".join(sync["digests"]),
                file=sys.stderr,
                flush=True,
            )
        return EXIT_SYNC_MISMATCH
    return 0


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    tf.random.set_seed(seed)


def _all_variables(wl: Any) -> list[Any]:
    """Every variable in a fixed order: networks' weights and statistics, optimizer state."""
    state = [v for m in wl.networks for v in m.variables]
    for name in sorted(wl.optimizers):
        state += optimizer_variables(wl.optimizers[name])
    return state


def _check_sync(cfg: JobConfig, ctx: DistContext, wl: Any) -> dict[str, Any]:
    if cfg.debug_desync and ctx.rank == 1:  # prove the check can fail
        wl.networks[0].trainable_variables[0].assign_add(
            tf.ones_like(wl.networks[0].trainable_variables[0]) * 1e-3
        )
    mine = ctx.digests(_all_variables(wl))
    digests = [d for part in ctx.allgather_object(mine) for d in part]
    return {"identical": len(set(digests)) == 1, "digests": digests}


def _param_counts(networks: list[Any]) -> dict[str, dict[str, int]]:
    def count(vs: list[Any]) -> int:
        return int(sum(np.prod(v.shape) for v in vs))

    return {
        m.name: {"total": count(m.variables), "trainable": count(m.trainable_variables)}
        for m in networks
    }


def _write_outputs(
    cfg: JobConfig,
    ctx: DistContext,
    wl: Any,
    data: Any,
    log: StepLog,
    switch: TimelineSwitch,
    started: float,
    burn_in_s: float,
    epoch_clocks: tuple[list[float], list[float]],
    history: dict[str, list[float]],
    hostnames: list[str],
    sync: Optional[dict[str, Any]],
    load: Optional[dict[str, Any]] = None,
) -> None:
    epoch_times, epoch_cpu = epoch_clocks
    switch.collect(cfg.run_dir)
    atomic_write(cfg.run_dir / "steps.json", encode_steps(log.to_file(ctx.rank)), durable=True)
    durations = sorted(log.durations_ms())
    params = _param_counts(wl.networks)
    accuracy = history.pop("accuracy", None)
    held_out = {k: history.pop(k, None) for k in VAL_KEYS}  # None without a held-out split
    lr = cfg.lr if cfg.lr is not None else module_of(cfg.model).DEFAULT_LR
    record = {
        "schema_version": METRICS_SCHEMA_VERSION,
        "workload": cfg.workload,
        "model": cfg.model,
        "strategy": ctx.strategy_name,
        "cross_device_ops": getattr(ctx, "cross_device_ops", None),
        "ranks": ctx.size,
        "replicas": ctx.replicas,
        "batch_per_rank": cfg.batch_per_rank,
        "global_batch": ctx.global_batch,
        "epochs": cfg.epochs,
        "steps_per_epoch": data.steps_per_epoch,
        "dataset_size": data.dataset_size,
        "data": data.description,
        "input_images_per_s": data.input_images_per_s,
        "image_size": cfg.image_size,
        "num_classes": cfg.num_classes if cfg.workload == "cnn" else None,
        "device": cfg.device,
        "threads": cfg.threads,
        "fp16_allreduce": cfg.fp16_allreduce,
        "mixed_precision": ctx.policy,
        "timeline": cfg.timeline,
        "lr": lr,
        "lr_scaled": lr * lr_scale(cfg.lr_scaling, ctx.global_batch, ref_batch_of(cfg)),
        "lr_scaling": cfg.lr_scaling,
        "lr_ref_batch": ref_batch_of(cfg),
        "warmup_epochs": cfg.warmup_epochs,
        "burn_in_steps": cfg.burn_in_steps,
        "burn_in_s": burn_in_s,
        "epoch_time_s": epoch_times,
        "epoch_cpu_s": epoch_cpu,
        "images_per_s": [ctx.global_batch * data.steps_per_epoch / t for t in epoch_times],
        "fit_time_s": sum(epoch_times),
        "losses": history,
        "train_loss": history.get("loss") if cfg.workload == "cnn" else None,
        "train_accuracy": accuracy,
        **held_out,
        "step_time": step_time_summary(durations),
        "params": params,
        "param_count": sum(p["trainable"] for p in params.values()),
        "sync_check": sync,
        "started_unix_s": started,
        "finished_unix_s": time.time(),
        "provenance": provenance(
            tf.__version__, keras_version(), ctx.versions()["horovod"], hostnames, list(cfg.argv)
        ),
        "load": load,
    }
    metrics = metrics_from_dict(record)
    atomic_write(cfg.run_dir / "metrics.json", encode_metrics(metrics), durable=True)
