"""The two distribution strategies behind one small interface the model files program against.

`horovod`: one process per rank, `hvd.DistributedGradientTape` averages gradients with an
allreduce (optionally fp16-compressed); fusion threshold, cycle time and hierarchical allreduce
come from Horovod's own environment variables (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME,
HOROVOD_HIERARCHICAL_ALLREDUCE) set by the rendered script.
`mirrored`: one process, `tf.distribute.MirroredStrategy` over N devices (logical CPU devices on a
machine without GPUs) with the chosen cross-device reduction.

Mixed precision: `mixed_float16` with loss scaling on GPU; on CPU `mixed_bfloat16` (float16
kernels are missing or slow on CPU, bfloat16 needs no loss scaling). Variables stay float32, so
gradients and their allreduce are float32 (use --fp16-allreduce to halve the bytes on the wire).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from hpcscale.model.job_cli import DEFAULT_CROSS_DEVICE_OPS
from jobs.tf.compat import KERAS3, build_optimizer, optimizer_variables, tf_variables
from jobs.tf.config import JobConfig, JobUsageError, gpu_only_message, lr_scale, ref_batch_of
from jobs.tf.gpus import gpu_for_local_rank, gpus_for_replicas

EPOCH_METRICS_TENSOR = "hpcscale_epoch_metrics"


class ScaledWarmup(tf.keras.optimizers.schedules.LearningRateSchedule):
    """TensorFlow twin of `jobs.tf.config.scaled_lr` (which is the tested definition)."""

    def __init__(
        self,
        base_lr: float,
        warmup_steps: float,
        global_batch: int,
        ref_batch: int,
        rule: str = "linear",
    ) -> None:
        super().__init__()
        self.base_lr = float(base_lr)
        self.warmup_steps = float(warmup_steps)
        self.global_batch, self.ref_batch, self.rule = int(global_batch), int(ref_batch), rule
        self.target = self.base_lr * lr_scale(rule, self.global_batch, self.ref_batch)

    def __call__(self, step: Any) -> tf.Tensor:
        target = self.target
        if self.warmup_steps <= 0:
            return tf.constant(target, tf.float32)
        frac = tf.minimum(tf.cast(step, tf.float32) / self.warmup_steps, 1.0)
        return self.base_lr + (target - self.base_lr) * frac

    def get_config(self) -> dict[str, Any]:
        return {
            "base_lr": self.base_lr,
            "warmup_steps": self.warmup_steps,
            "global_batch": self.global_batch,
            "ref_batch": self.ref_batch,
            "rule": self.rule,
        }


class DistContext:
    """What model files may use: optimizers, loss reduction, gradients, apply."""

    strategy_name: str = ""
    rank: int = 0
    size: int = 1  # processes
    replicas: int = 1  # data-parallel replicas (ranks for horovod, devices for mirrored)
    local_rank: int = 0

    def __init__(self, cfg: JobConfig) -> None:
        self.cfg = cfg
        self.policy: Optional[str] = None
        self.global_batch = cfg.batch_per_rank  # fixed once replicas are known
        self.steps_per_epoch = 1

    # -- set-up -------------------------------------------------------------------------------
    def set_policy(self, gpu: bool) -> None:
        if self.cfg.mixed_precision:
            self.policy = "mixed_float16" if gpu else "mixed_bfloat16"
            tf.keras.mixed_precision.set_global_policy(self.policy)

    def scope(self) -> Any:
        """Context in which networks and optimizers are created."""
        return contextlib.nullcontext()

    # -- the model files' API -----------------------------------------------------------------
    def optimizer(
        self,
        kind: str,
        base_lr: float,
        updates_per_step: int = 1,
        **kwargs: Any,
    ) -> Any:
        """An optimizer whose learning rate follows --lr-scaling for this global batch, with
        linear warm-up over --warmup-epochs (counted in this optimizer's own updates)."""
        warmup = self.cfg.warmup_epochs * self.steps_per_epoch * updates_per_step
        cfg = self.cfg
        lr = ScaledWarmup(base_lr, warmup, self.global_batch, ref_batch_of(cfg), cfg.lr_scaling)
        cls = {"adam": tf.keras.optimizers.Adam, "sgd": tf.keras.optimizers.SGD}[kind]
        opt = cls(learning_rate=lr, **kwargs)
        if self.policy == "mixed_float16":
            opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)
        return opt

    def mean(self, per_example: tf.Tensor) -> tf.Tensor:
        """A replica-local mean, for reporting."""
        return tf.reduce_mean(tf.cast(per_example, tf.float32))

    def loss(self, per_example: tf.Tensor) -> tf.Tensor:
        """The scalar to differentiate: its gradient, once reduced, is the global-batch mean."""
        return self.mean(per_example)

    def gradients(
        self, tape: tf.GradientTape, loss: tf.Tensor, variables: Sequence[Any], optimizer: Any
    ) -> list[tf.Tensor]:
        scaled = _scale_loss(optimizer, loss)
        grads = self._raw_gradients(tape, scaled, variables)
        return _unscale_gradients(optimizer, grads)

    def apply(self, optimizer: Any, grads: Sequence[tf.Tensor], variables: Sequence[Any]) -> None:
        optimizer.apply_gradients(zip(grads, variables))

    # -- the harness' API ---------------------------------------------------------------------
    def _raw_gradients(
        self, tape: tf.GradientTape, loss: tf.Tensor, variables: Sequence[Any]
    ) -> list[tf.Tensor]:
        return tape.gradient(loss, tf_variables(variables))

    def prepare(self, models: Sequence[tf.keras.Model], optimizers: dict[str, Any]) -> None:
        """Build optimizer slots for their variables; horovod then broadcasts rank 0's state."""

    def compile_step(self, step: Callable[[Any], dict[str, tf.Tensor]]) -> Callable:
        return tf.function(step)

    def distribute(self, dataset: tf.data.Dataset) -> Any:
        return dataset

    def step_values(self, out: dict[str, Any]) -> dict[str, float]:
        return {k: float(v) for k, v in out.items()}

    def average_across(self, values: dict[str, float]) -> dict[str, float]:
        return values

    def sync_local_state(self, models: Sequence[tf.keras.Model]) -> None:
        """Make rank-local state (batch-norm moving statistics) the same everywhere."""

    def digests(self, variables: Sequence[Any]) -> list[str]:
        """One digest of all variables per rank/replica."""
        return [_digest(v.numpy() for v in variables)]

    def allgather_object(self, obj: Any) -> list[Any]:
        return [obj]

    def shutdown(self) -> None:
        pass

    def versions(self) -> dict[str, Optional[str]]:
        return {"horovod": None}


class HorovodContext(DistContext):
    strategy_name = "horovod"

    def __init__(self, cfg: JobConfig) -> None:
        super().__init__(cfg)
        try:
            import horovod
            import horovod.tensorflow as hvd
        except ImportError as exc:
            raise JobUsageError(
                f"--strategy horovod needs Horovod ({exc}); install it (make jobs) or use "
                "--strategy mirrored"
            ) from exc
        self.hvd = hvd
        self._hvd_version = horovod.__version__
        _configure_devices(cfg, logical_cpus=1)
        hvd.init()
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
        self.replicas = self.size
        if cfg.device == "gpu":  # one GPU per local rank, or exit 2 saying what is visible
            gpus = tf.config.list_physical_devices("GPU")
            names = [g.name for g in gpus]
            env = os.environ.get("CUDA_VISIBLE_DEVICES")
            gpu = gpus[gpu_for_local_rank(names, self.local_rank, hvd.local_size(), env)]
            tf.config.experimental.set_memory_growth(gpu, True)
            tf.config.set_visible_devices(gpu, "GPU")
        self.set_policy(cfg.device == "gpu")
        self.compression = hvd.Compression.fp16 if cfg.fp16_allreduce else hvd.Compression.none

    def _raw_gradients(
        self, tape: tf.GradientTape, loss: tf.Tensor, variables: Sequence[Any]
    ) -> list[tf.Tensor]:
        dtape = self.hvd.DistributedGradientTape(tape, compression=self.compression)
        # Horovod's gradient path has no tensor-dependent Python control flow: converting it
        # with autograph on every trace only costs start-up (about a quarter of a small run's CPU)
        gradient = tf.autograph.experimental.do_not_convert(dtape.gradient)
        return gradient(loss, tf_variables(variables))

    def prepare(self, models: Sequence[tf.keras.Model], optimizers: dict[str, Any]) -> None:
        for name, opt in optimizers.items():
            build_optimizer(opt, _owned_variables(models, name))
        state = [v for m in models for v in m.variables]
        state += [v for opt in optimizers.values() for v in optimizer_variables(opt)]
        self.hvd.broadcast_variables(tf_variables(state), root_rank=0)

    def average_across(self, values: dict[str, float]) -> dict[str, float]:
        keys = sorted(values)
        if not keys:
            return {}
        vec = tf.constant([values[k] for k in keys], tf.float64)
        avg = self.hvd.allreduce(vec, op=self.hvd.Average, name=EPOCH_METRICS_TENSOR).numpy()
        return {k: float(x) for k, x in zip(keys, avg)}

    def sync_local_state(self, models: Sequence[tf.keras.Model]) -> None:
        local = [v for m in models for v in m.non_trainable_variables if _is_float(v)]
        if not local or self.size == 1:
            return
        avg = self.hvd.grouped_allreduce(
            [tf.convert_to_tensor(v) for v in tf_variables(local)],
            op=self.hvd.Average,
            name="hpcscale_local_state",
        )
        for var, val in zip(local, avg):
            var.assign(val)

    def allgather_object(self, obj: Any) -> list[Any]:
        return list(self.hvd.allgather_object(obj))

    def shutdown(self) -> None:
        self.hvd.shutdown()

    def versions(self) -> dict[str, Optional[str]]:
        return {"horovod": self._hvd_version}


class MirroredContext(DistContext):
    strategy_name = "mirrored"

    def __init__(self, cfg: JobConfig) -> None:
        super().__init__(cfg)
        op = cfg.cross_device_ops or DEFAULT_CROSS_DEVICE_OPS
        if cfg.device == "gpu":
            _configure_devices(cfg, logical_cpus=1)
            gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
            env = os.environ.get("CUDA_VISIBLE_DEVICES")
            devices = gpus_for_replicas(gpus, cfg.devices, env)
        else:
            if op in ("nccl", "hierarchical_copy"):
                raise JobUsageError(gpu_only_message(op))
            _configure_devices(cfg, logical_cpus=cfg.devices)
            devices = [d.name for d in tf.config.list_logical_devices("CPU")[: cfg.devices]]
        cross = {
            "nccl": lambda: tf.distribute.NcclAllReduce(),
            "hierarchical_copy": lambda: tf.distribute.HierarchicalCopyAllReduce(),
            "reduce_to_one": lambda: tf.distribute.ReductionToOneDevice(),
        }[op]()
        self.cross_device_ops = op
        self.strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=cross)
        self.replicas = self.strategy.num_replicas_in_sync
        self.set_policy(cfg.device == "gpu")

    def scope(self) -> Any:
        return self.strategy.scope()

    def loss(self, per_example: tf.Tensor) -> tf.Tensor:
        # apply_gradients sums replica gradients, so each replica divides by the global batch.
        return tf.nn.compute_average_loss(
            tf.cast(per_example, tf.float32), global_batch_size=self.global_batch
        )

    def prepare(self, models: Sequence[tf.keras.Model], optimizers: dict[str, Any]) -> None:
        with self.strategy.scope():
            for name, opt in optimizers.items():
                build_optimizer(opt, _owned_variables(models, name))

    def compile_step(self, step: Callable[[Any], dict[str, tf.Tensor]]) -> Callable:
        strategy = self.strategy

        @tf.function
        def replicated(batch: Any) -> Any:
            return strategy.run(step, args=(batch,))

        return replicated

    def distribute(self, dataset: tf.data.Dataset) -> Any:
        return self.strategy.experimental_distribute_dataset(dataset)

    def step_values(self, out: dict[str, Any]) -> dict[str, float]:
        local = self.strategy.experimental_local_results
        return {k: float(np.mean([t.numpy() for t in local(v)])) for k, v in out.items()}

    def sync_local_state(self, models: Sequence[tf.keras.Model]) -> None:
        # Batch-norm statistics are sync-on-read: reading aggregates (mean) over replicas, and
        # assigning in cross-replica context writes every replica's copy.
        with self.strategy.scope():
            for m in models:
                for v in m.non_trainable_variables:
                    if _is_float(v):
                        v.assign(tf.convert_to_tensor(v))

    def digests(self, variables: Sequence[Any]) -> list[str]:
        per_replica = [self.strategy.experimental_local_results(v) for v in variables]
        return [_digest(vals[i].numpy() for vals in per_replica) for i in range(self.replicas)]


def make_context(cfg: JobConfig) -> DistContext:
    if cfg.strategy == "mirrored":
        return MirroredContext(cfg)
    return HorovodContext(cfg)


def _configure_devices(cfg: JobConfig, logical_cpus: int) -> None:
    """Threads, GPU visibility and logical CPU devices: all must be set before TF's runtime
    starts, i.e. before the first op."""
    if cfg.threads:
        tf.config.threading.set_intra_op_parallelism_threads(cfg.threads)
    if cfg.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(cfg.inter_op_threads)
    if cfg.device == "cpu" and tf.config.list_physical_devices("GPU"):
        tf.config.set_visible_devices([], "GPU")  # (--device gpu: the contexts map GPUs)
    if logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(logical_cpus)]
        )


def _owned_variables(models: Sequence[tf.keras.Model], optimizer_name: str) -> list[Any]:
    """Optimizers are keyed by the network they train (same name)."""
    for m in models:
        if m.name == optimizer_name:
            return list(m.trainable_variables)
    raise KeyError(f"no network named {optimizer_name!r} for its optimizer")


def _scale_loss(optimizer: Any, loss: tf.Tensor) -> tf.Tensor:
    if not isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer):
        return loss
    if KERAS3:
        return optimizer.scale_loss(loss)
    return optimizer.get_scaled_loss(loss)


def _unscale_gradients(optimizer: Any, grads: list[tf.Tensor]) -> list[tf.Tensor]:
    # Keras 3 unscales inside apply_gradients.
    if KERAS3 or not isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer):
        return grads
    return optimizer.get_unscaled_gradients(grads)


def _is_float(v: Any) -> bool:
    """Keras 3 variables report dtype as a string."""
    return tf.as_dtype(v.dtype).is_floating


def _digest(arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]
