#!/usr/bin/env python3
"""The PyTorch DDP twin of jobs/tf/train.py: one process per rank (torchrun, mpirun or srun), the
same batch arithmetic, burn-in, timed epochs and outputs, so hpcscale's collector reads them
unchanged. See docs/pytorch.md.

Rank 0 writes into --run-dir: metrics.json (hpcscale/formats/metrics.py), steps.json
(hpcscale/formats/steps.py) and ddp.json (what metrics.json has no field for yet: torch's
version, the backend, the DDP knobs, the launcher, the all-reduce check of known values, the
trace window). With --timeline every rank writes RUN_DIR/traces/rank<r>.json, a torch.profiler
(Kineto) trace of a bounded window: --trace-skip steps counted from the first (burn-in steps
included) are left out, then --trace-steps are recorded (fewer when the run ends first). It is
written as rank<r>.json.tmp and renamed, so a job killed while writing leaves a .tmp
(hpcscale.collect.traces.torch reads both).

Order (each rank): rank/world from the launcher (jobs/torch/dist.py) -> process group (gloo on
CPU, nccl on GPUs) -> all-reduce of known values -> seed (seed + rank) -> data: synthetic (a pool
drawn from (seed, rank), cycled) or an image folder (jobs/torch/data.py: the TF program's
layout, subset, shard and decoding) -> networks (jobs/torch/nets.py) wrapped in DDP with the knobs
-> burn-in steps, untimed -> timed epochs -> batch-norm statistics averaged over ranks ->
optional weight check -> outputs. images/s = global_batch * steps_per_epoch / epoch time.

DCGAN: a discriminator update on real and on detached fakes (two forwards, one backward of the
summed loss, one all-reduce), then a generator update through the discriminator's local module with
its weights frozen (no discriminator gradients and no all-reduce for them), the usual PyTorch
order; the TensorFlow program takes both gradients from one forward.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import platform
import random
import socket
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

REPO = Path(__file__).resolve().parents[2]  # a checkout, or hpcscale/_data/ when installed
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if REPO.name == "_data":  # installed jobs/ run by an interpreter without hpcscale
    sys.path.append(str(REPO.parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from hpcscale.formats.atomic import atomic_write  # noqa: E402
from hpcscale.formats.metrics import SCHEMA_VERSION, encode_metrics, metrics_from_dict  # noqa: E402
from hpcscale.formats.steps import encode_steps  # noqa: E402
from hpcscale.model.job_cli import (  # noqa: E402
    JOB_FLAGS,
    non_negative,
    non_negative_float,
    positive,
    positive_float,
)
from hpcscale.model.vocab import STRATEGIES  # noqa: E402
from jobs.load import machine_id  # noqa: E402
from jobs.load import sample as load_sample  # noqa: E402
from jobs.provenance import git_revision, mpi_library_version  # noqa: E402
from jobs.steps import StepLog, step_time_summary  # noqa: E402
from jobs.torch import data as folder_data  # noqa: E402
from jobs.torch import dist as ddp_env  # noqa: E402
from jobs.torch.nets import (  # noqa: E402
    BACKBONES,
    BN_STATS,
    CNN_MODELS,
    GAN_MODELS,
    build,
    param_counts,
)

STRATEGY = "torch_ddp"
DEFAULT_LR = {"dcgan": 2e-4, "resnet50": 0.0125, "vgg16": 0.0125, "classifier": 0.001}
DEFAULT_SYNTHETIC_SIZE = 8192
DEFAULT_CLASSES = 10
DATASETS = ("synthetic", "folder")
POOL_BATCHES = 4
EXIT_USAGE, EXIT_SYNC_MISMATCH = 2, 3
TRACE_SKIP, TRACE_STEPS = 5, 20  # hpcscale.model.campaign.TraceWindow's defaults
TRACE_DIR = "traces"  # under --run-dir (hpcscale.collect.traces.torch.reader.TRACE_DIR)
ENV_PREFIXES = ("TORCH_", "NCCL_", "GLOO_", "OMPI_", "MV2_", "MASTER_", "OMP_")
# flags of jobs/tf/train.py that mean nothing to DDP (Horovod's, MirroredStrategy's): refused
NOT_DDP = {
    "fp16_allreduce": "Horovod's; DDP's counterpart is --fp16-compress",
    "mark_cycles": "Horovod's timeline cycles; a profiler trace has none",
    "cross_device_ops": "MirroredStrategy's",
    "devices": "MirroredStrategy's",
    "mixed_precision": "not in the torch programs yet",
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jobs/torch/train.py",
        description="Train one model with PyTorch DistributedDataParallel and measure it.",
    )
    JOB_FLAGS["model"].add_to(p, choices=[*GAN_MODELS, *CNN_MODELS])
    for dest in ("run_dir", "batch_per_rank", "epochs", "device", "threads", "seed"):
        JOB_FLAGS[dest].add_to(p)
    p.add_argument("--strategy", default=STRATEGY, choices=[STRATEGY], help="torch_ddp only")
    for dest in NOT_DDP:  # accepted by the parser so the message can say why they are refused
        JOB_FLAGS[dest].add_to(p, help=argparse.SUPPRESS)
    JOB_FLAGS["timeline"].add_to(
        p, help="torch.profiler trace of a window of steps per rank -> RUN_DIR/traces/rank<r>.json"
    )
    a = p.add_argument
    a("--trace-skip", type=non_negative, default=TRACE_SKIP, help="--timeline: steps before "
      f"the window, burn-in included; default {TRACE_SKIP}")  # fmt: skip
    a("--trace-steps", type=positive, default=TRACE_STEPS, help="--timeline: steps recorded; "
      f"default {TRACE_STEPS}")  # fmt: skip
    a("--image-size", type=positive, default=64, help="square images, px; default 64")
    a("--num-classes", type=positive, help=f"CNN classes; default {DEFAULT_CLASSES}, "
      "--data-dir: its sub-folders")  # fmt: skip
    a("--data-dir", type=Path, help="one sub-folder of images per class (the folder data)")
    a("--dataset", choices=DATASETS, help="synthetic (default) or folder (default with "
      "--data-dir)")  # fmt: skip
    a("--dataset-size", type=positive, help="images per epoch, all ranks; default 8192 "
      "(--data-dir: a seeded subset)")  # fmt: skip
    a("--steps-per-epoch", type=positive, help="default dataset size // global batch")
    a("--burn-in-steps", type=non_negative, default=1, help="untimed steps first; default 1")
    a("--width", type=positive, default=64, help="GAN base width; default 64")
    a("--latent-dim", type=positive, default=100, help="GAN noise size; default 100")
    a("--backbone", default="resnet50", choices=list(BACKBONES), help="classifier backbone")
    a("--lr", type=positive_float, help="reference learning rate (default per model)")
    a("--lr-scaling", default="linear", choices=["linear", "sqrt", "none"])
    a("--lr-ref-batch", type=positive, help="default --batch-per-rank")
    a("--warmup-epochs", type=non_negative_float, default=0.0)
    a("--check-sync", action="store_true", help="compare weights across ranks at the end")
    a("--backend", default="auto", choices=["auto", "gloo", "nccl"], help="default gloo on "
      "CPU, nccl on GPUs")  # fmt: skip
    a("--bucket-cap-mb", type=positive_float, default=25.0, help="DDP bucket size; default 25")
    a("--gradient-as-bucket-view", action="store_true", help="DDP: gradients alias buckets")
    a("--static-graph", action="store_true", help="DDP: the graph never changes")
    a("--fp16-compress", action="store_true", help="DDP: fp16_compress_hook on the gradients")
    return p


def usage_error(msg: str) -> NoReturn:
    print(f"train.py: error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_USAGE)


def lr_scale(rule: str, global_batch: int, ref_batch: int) -> float:
    """As jobs/tf/config.py: global_batch / ref_batch (linear), its square root, or 1."""
    ratio = global_batch / ref_batch
    return {"linear": ratio, "sqrt": ratio**0.5, "none": 1.0}[rule]


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def synthetic(args: argparse.Namespace, rank: int, global_batch: int) -> tuple[Any, int, int]:
    """(batches, dataset size, steps per epoch): a pool drawn from (seed, rank), cycled."""
    size = args.dataset_size
    if size is None:
        size = DEFAULT_SYNTHETIC_SIZE
        if args.steps_per_epoch is not None:
            size = args.steps_per_epoch * global_batch
    steps = args.steps_per_epoch or max(1, size // global_batch)
    rng = np.random.default_rng([args.seed, rank])
    px = args.image_size
    shape = (min(steps, POOL_BATCHES), args.batch_per_rank, 3, px, px)
    images = torch.from_numpy(rng.uniform(-1.0, 1.0, size=shape).astype(np.float32))
    if args.model in GAN_MODELS:
        pool: list[Any] = list(images)
    else:
        labels = torch.from_numpy(rng.integers(0, args.num_classes, size=shape[:2]))
        pool = list(zip(images, labels.long()))
    return pool, size, steps


def cycle(pool: list[Any], device: torch.device) -> Iterator[Any]:
    return to_device(itertools.cycle(pool), device)


def to_device(batches: Iterator[Any], device: torch.device) -> Iterator[Any]:
    for batch in batches:
        if isinstance(batch, tuple):
            yield tuple(t.to(device, non_blocking=True) for t in batch)
        else:
            yield batch.to(device, non_blocking=True)


def wrap(net: nn.Module, args: argparse.Namespace, device: torch.device) -> DDP:
    """DDP with the knobs; rank 0's weights are broadcast here."""
    ddp = DDP(
        net.to(device),
        device_ids=[device.index] if device.type == "cuda" else None,
        bucket_cap_mb=args.bucket_cap_mb,
        gradient_as_bucket_view=args.gradient_as_bucket_view,
        static_graph=args.static_graph,
    )
    if args.fp16_compress:
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    return ddp


class Frozen:
    """Weights that need no gradient for one backward (the generator's, through D)."""

    def __init__(self, net: nn.Module) -> None:
        self.params = [p for p in net.parameters() if p.requires_grad]

    def __enter__(self) -> None:
        for p in self.params:
            p.requires_grad_(False)

    def __exit__(self, *exc: object) -> None:
        for p in self.params:
            p.requires_grad_(True)


def gan_step(nets: dict[str, DDP], opts: dict[str, Any], latent: int) -> Callable[..., Any]:
    g, d = nets["generator"], nets["discriminator"]
    g_opt, d_opt = opts["generator"], opts["discriminator"]
    frozen = Frozen(d.module)

    def step(real: torch.Tensor) -> dict[str, torch.Tensor]:
        fake = g(torch.randn(real.shape[0], latent, device=real.device))
        d_opt.zero_grad()
        real_out, fake_out = d(real), d(fake.detach())  # batch norm: one batch each, as TF
        d_loss = F.binary_cross_entropy_with_logits(
            real_out, torch.ones_like(real_out)
        ) + F.binary_cross_entropy_with_logits(fake_out, torch.zeros_like(fake_out))
        d_loss.backward()
        d_opt.step()
        g_opt.zero_grad()
        with frozen:
            out = d.module(fake)
        g_loss = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        g_loss.backward()
        g_opt.step()
        return {"d_loss": d_loss.detach(), "g_loss": g_loss.detach()}

    return step


def cnn_step(net: DDP, opt: Any) -> Callable[..., Any]:
    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        images, labels = batch
        opt.zero_grad()
        logits = net(images)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        hits = (logits.argmax(-1) == labels).float().mean()
        return {"loss": loss.detach(), "accuracy": hits.detach()}

    return step


def optimizers(args: argparse.Namespace, nets: dict[str, DDP], lr: float) -> dict[str, Any]:
    """As the Keras twins: Adam(beta_1 0.5) for the GAN, SGD(0.9) for resnet50/vgg16, Adam for
    the classifier."""
    if args.model in GAN_MODELS:
        betas = (0.5, 0.999)
        return {k: torch.optim.Adam(n.parameters(), lr=lr, betas=betas) for k, n in nets.items()}
    if args.model == "classifier":
        return {k: torch.optim.Adam(n.parameters(), lr=lr) for k, n in nets.items()}
    return {k: torch.optim.SGD(n.parameters(), lr=lr, momentum=0.9) for k, n in nets.items()}


def average_across(values: dict[str, float], device: torch.device) -> dict[str, float]:
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return {k: float(v) / dist.get_world_size() for k, v in zip(keys, t.tolist())}


def sync_bn_stats(nets: dict[str, DDP]) -> None:
    """Each rank's batch-norm moving statistics -> their mean over ranks (as the TF harness)."""
    for net in nets.values():
        for name, buf in net.module.named_buffers():
            if name.endswith(BN_STATS):
                dist.all_reduce(buf)
                buf.div_(dist.get_world_size())


def digest(nets: dict[str, DDP], opts: dict[str, Any]) -> str:
    """sha256 of every weight, statistic and optimizer state tensor, in a fixed order."""
    h = hashlib.sha256()
    for name in sorted(nets):
        for t in nets[name].module.state_dict().values():
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
    for name in sorted(opts):
        for state in opts[name].state.values():
            for key in sorted(state):
                if torch.is_tensor(state[key]):
                    h.update(state[key].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def gather(obj: Any) -> list[Any]:
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class Tracer:
    """--timeline: torch.profiler over a bounded window of steps, stepped as each training
    step begins (burn-in included), each rank's trace written to RUN_DIR/traces/rank<r>.json by
    way of a .tmp. A ProfilerStep runs from one step's start to the next's, so what the harness
    does between steps (the load sample after the burn-in) falls in the step before, and the run's
    last step is closed as it ends (the epoch's loss average is not traced). Without --timeline
    every call is a no-op. record_shapes gives the collectives' sizes (bytes per step); the window
    keeps a long run's traces small."""

    def __init__(self, args: argparse.Namespace, device: torch.device, rank: int) -> None:
        self.path = Path(args.run_dir) / TRACE_DIR / f"rank{rank}.json"
        self.prof: Any = None
        self.started = False
        if not args.timeline:
            return
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        warmup = 1 if args.trace_skip else 0  # the last skipped step warms the profiler up
        self.prof = profile(
            activities=activities,
            schedule=schedule(
                wait=args.trace_skip - warmup, warmup=warmup, active=args.trace_steps, repeat=1
            ),
            record_shapes=True,
            on_trace_ready=self._write,
        )
        self.prof.start()

    def _write(self, prof: Any) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(tmp))
        os.replace(tmp, self.path)

    def begin(self) -> None:
        """A step begins: the one before it ends (the first step starts the profiler's count)."""
        if self.prof is not None and self.started:
            self.prof.step()
        self.started = True

    def stop(self) -> None:
        """Ends the profiler; a window still open (the run had fewer steps) is written now."""
        if self.prof is not None:
            prof, self.prof = self.prof, None
            prof.stop()


def check_args(args: argparse.Namespace) -> None:
    for dest, why in NOT_DDP.items():
        if getattr(args, dest) not in (None, False):
            usage_error(f"{JOB_FLAGS[dest].flag} does not apply to torch_ddp ({why})")
    if args.model in GAN_MODELS:
        n = 3 if args.image_size < 64 else 4
        if args.image_size % 2**n or args.image_size < 16:
            usage_error(f"--image-size {args.image_size}: the GAN needs a multiple of {2**n}")
    elif args.image_size < 32:
        usage_error(f"--image-size {args.image_size}: {args.model} needs at least 32 px")
    if args.dataset == "folder" and args.data_dir is None:
        usage_error("--dataset folder: a dataset on disk needs --data-dir")
    if args.dataset == "synthetic" and args.data_dir is not None:
        usage_error(f"--data-dir {args.data_dir}: --dataset synthetic reads no --data-dir")


def data_format(args: argparse.Namespace) -> str:
    """--dataset, by default synthetic without --data-dir and folder with it (as TF's)."""
    return args.dataset or ("folder" if args.data_dir is not None else "synthetic")


def list_data(args: argparse.Namespace, world: int) -> Optional[folder_data.Folder]:
    """The image folder's listing (None: synthetic), checked before the rendezvous so a bad
    folder fails at once on every rank; the classifier's classes are its sub-folders."""
    if data_format(args) != "folder":
        if args.model in CNN_MODELS and args.num_classes is None:
            args.num_classes = DEFAULT_CLASSES
        return None
    try:
        found = folder_data.list_folder(
            args.data_dir, args.batch_per_rank * world, args.dataset_size, args.seed
        )
    except folder_data.DataUsageError as exc:
        usage_error(str(exc))
    if args.model in CNN_MODELS:
        n = len(found.classes)
        if args.num_classes not in (None, n):
            usage_error(
                f"--num-classes {args.num_classes} but --data-dir {args.data_dir} has {n} "
                f"classes (sub-folders); leave --num-classes out to use the data's"
            )
        args.num_classes = n
    return found


def folder_batches(
    args: argparse.Namespace, found: folder_data.Folder, rank: int, world: int
) -> tuple[folder_data.Prefetched, int, int, float]:
    """(batches, dataset size, steps per epoch, input_images_per_s): this rank's shard,
    decoded a few batches ahead; the decoding rate measured alone first, as the TF harness."""
    mine = found.shard(rank, world)
    size = len(found.train)
    steps = args.steps_per_epoch or max(1, size // (args.batch_per_rank * world))
    labelled = args.model in CNN_MODELS

    def stream() -> Iterator[Any]:
        return folder_data.batches(
            mine, args.image_size, args.batch_per_rank, args.seed, rank, labelled
        )

    rate = folder_data.images_per_s(stream(), args.batch_per_rank) * world
    return folder_data.Prefetched(stream()), size, steps, rate


def main(argv: Optional[list[str]] = None) -> int:
    started = time.time()
    args = parser().parse_args(argv)
    check_args(args)
    try:
        denv = ddp_env.from_environ()
    except ddp_env.DistUsageError as exc:
        usage_error(str(exc))
    found = list_data(args, denv.world_size)
    if args.device == "gpu" and not torch.cuda.is_available():
        usage_error("--device gpu: torch sees no CUDA device here")
    device = torch.device(f"cuda:{denv.local_rank}" if args.device == "gpu" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = ddp_env.default_backend(args.device) if args.backend == "auto" else args.backend
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        store = ddp_env.init(denv, backend)
    except ddp_env.DistUsageError as exc:
        usage_error(str(exc))
    try:
        return train(args, denv, device, backend, started, store, found)
    except folder_data.DataUsageError as exc:  # an image that does not decode
        usage_error(str(exc))
    finally:
        dist.destroy_process_group()


def train(
    args: argparse.Namespace,
    denv: ddp_env.DistEnv,
    device: torch.device,
    backend: str,
    started: float,
    store: Any,
    found: Optional[folder_data.Folder] = None,
) -> int:
    rank, world = dist.get_rank(), dist.get_world_size()
    check = ddp_env.allreduce_check(device)
    global_batch = args.batch_per_rank * world
    seed_all(args.seed + rank)
    input_rate: Optional[float] = None
    if found is None:
        pool, dataset_size, steps = synthetic(args, rank, global_batch)
        batches, shard_images, data_name = cycle(pool, device), None, "synthetic"
    else:
        loader, dataset_size, steps, input_rate = folder_batches(args, found, rank, world)
        batches, shard_images = to_device(loader, device), len(found.shard(rank, world))
        data_name = str(found.root)  # as the TF program's metrics.json `data`
    workload = "gan" if args.model in GAN_MODELS else "cnn"
    log0 = print if rank == 0 else (lambda *a, **k: None)
    log0(
        f"[hpcscale] model={args.model} strategy={STRATEGY} ranks={world} replicas={world} "
        f"global_batch={global_batch} steps_per_epoch={steps} data={data_name} "
        f"backend={backend} launcher={denv.launcher}",
        flush=True,
    )
    plain = build(
        args.model, args.image_size, num_classes=args.num_classes or DEFAULT_CLASSES,
        backbone=args.backbone, width=args.width, latent_dim=args.latent_dim,
    )  # fmt: skip
    params = {name: param_counts(net) for name, net in plain.items()}
    nets = {name: wrap(net, args, device) for name, net in plain.items()}
    base_lr = args.lr if args.lr is not None else DEFAULT_LR[args.model]
    ref_batch = args.lr_ref_batch or args.batch_per_rank
    lr_scaled = base_lr * lr_scale(args.lr_scaling, global_batch, ref_batch)
    opts = optimizers(args, nets, lr_scaled if args.warmup_epochs == 0 else base_lr)
    warmup_steps = args.warmup_epochs * steps
    if workload == "gan":
        step = gan_step(nets, opts, args.latent_dim)
    else:
        step = cnn_step(nets[next(iter(nets))], opts[next(iter(opts))])
    updates = 0

    def run_step() -> dict[str, float]:
        nonlocal updates
        if warmup_steps > 0:
            lr = lr_scaled if updates >= warmup_steps else (
                base_lr + (lr_scaled - base_lr) * updates / warmup_steps
            )  # fmt: skip
            for opt in opts.values():
                for group in opt.param_groups:
                    group["lr"] = lr
        updates += 1
        return {k: float(v.item()) for k, v in step(next(batches)).items()}

    for net in nets.values():
        net.train()
    log = StepLog()
    tracer = Tracer(args, device, rank)
    t0 = time.monotonic()
    for _ in range(args.burn_in_steps):
        tracer.begin()
        s = time.monotonic_ns()
        run_step()
        log.burn_in(s, time.monotonic_ns())
    burn_in_s = time.monotonic() - t0
    load_start = load_sample(gather, rank)
    epoch_times: list[float] = []
    epoch_cpu: list[float] = []
    history: dict[str, list[float]] = defaultdict(list)
    for epoch in range(args.epochs):
        sums: dict[str, float] = defaultdict(float)
        e0, c0 = time.monotonic_ns(), time.process_time()
        for i in range(steps):
            tracer.begin()
            s = time.monotonic_ns()
            values = run_step()
            log.add(epoch, i, s, time.monotonic_ns())
            for k, v in values.items():
                sums[k] += v
        if epoch == args.epochs - 1:
            tracer.stop()  # the last step ends the trace: nothing after it is traced
        epoch_times.append((time.monotonic_ns() - e0) / 1e9)
        epoch_cpu.append(time.process_time() - c0)
        means = average_across({k: v / steps for k, v in sums.items()}, device)
        for k, v in means.items():
            history[k].append(v)
        ips = global_batch * steps / epoch_times[-1]
        shown = " ".join(f"{k}={v:.4f}" for k, v in sorted(means.items()))
        log0(
            f"[hpcscale] epoch {epoch + 1}/{args.epochs} time_s={epoch_times[-1]:.3f} "
            f"images_per_s={ips:.1f} {shown}",
            flush=True,
        )

    if found is not None:
        loader.close()
    sync_bn_stats(nets)
    digests = gather(digest(nets, opts))
    sync = {"identical": len(set(digests)) == 1, "digests": digests}
    hostnames = gather(socket.gethostname())
    machines = gather(machine_id())
    load_end = load_sample(gather, rank)
    ranks_seen = gather({"rank": rank, "local_rank": denv.local_rank, "launcher": denv.launcher,
                         "shard_images": shard_images})  # fmt: skip
    if rank == 0:
        durations = sorted(log.durations_ms())
        accuracy = history.pop("accuracy", None)
        record = {
            "schema_version": SCHEMA_VERSION,
            "workload": workload,
            "model": args.model,
            "strategy": metrics_strategy(),
            "cross_device_ops": None,
            "ranks": world,
            "replicas": world,
            "batch_per_rank": args.batch_per_rank,
            "global_batch": global_batch,
            "epochs": args.epochs,
            "steps_per_epoch": steps,
            "dataset_size": dataset_size,
            "data": data_name,
            "input_images_per_s": input_rate,
            "image_size": args.image_size,
            "num_classes": args.num_classes if workload == "cnn" else None,
            "device": args.device,
            "threads": args.threads,
            "fp16_allreduce": args.fp16_compress,  # gradients in float16 on the wire
            "mixed_precision": None,
            "timeline": bool(args.timeline),  # a profiler trace (ddp.json: its window)
            "lr": base_lr,
            "lr_scaled": lr_scaled,
            "lr_scaling": args.lr_scaling,
            "lr_ref_batch": ref_batch,
            "warmup_epochs": args.warmup_epochs,
            "burn_in_steps": args.burn_in_steps,
            "burn_in_s": burn_in_s,
            "epoch_time_s": epoch_times,
            "epoch_cpu_s": epoch_cpu,
            "images_per_s": [global_batch * steps / t for t in epoch_times],
            "fit_time_s": sum(epoch_times),
            "losses": dict(history),
            "train_loss": history.get("loss") if workload == "cnn" else None,
            "train_accuracy": accuracy,
            "step_time": step_time_summary(durations),
            "params": params,
            "param_count": sum(p["trainable"] for p in params.values()),
            "sync_check": sync if args.check_sync else None,
            "started_unix_s": started,
            "finished_unix_s": time.time(),
            "provenance": provenance(hostnames),
            "load": {"machines": machines, "start": load_start, "end": load_end},
        }
        ddp = {
            "framework": "torch",
            "torch": torch.__version__,
            "strategy": STRATEGY,
            "backend": backend,
            "launcher": denv.launcher,
            "master_addr": denv.master_addr,
            "master_port": denv.master_port,
            "bucket_cap_mb": args.bucket_cap_mb,
            "gradient_as_bucket_view": args.gradient_as_bucket_view,
            "static_graph": args.static_graph,
            "fp16_compress": args.fp16_compress,
            "allreduce_check": check,
            "ranks": ranks_seen,
            "sync_check": sync,
            "trace_window": (
                {"skip": args.trace_skip, "steps": args.trace_steps} if args.timeline else None
            ),
        }
        write_outputs(Path(args.run_dir), record, log, ddp)
    if args.check_sync and not sync["identical"]:
        if rank == 0:
            print("train.py: error: weights differ across ranks after training: "
                  + ", ".join(digests), file=sys.stderr, flush=True)  # fmt: skip
        return EXIT_SYNC_MISMATCH
    del store  # the store outlives every collective above
    return 0


def metrics_strategy() -> str:
    """metrics.json's `strategy` field: torch_ddp (an hpcscale older than that strategy gets
    the one-process-per-rank value it knows; ddp.json says what really ran)."""
    return STRATEGY if STRATEGY in STRATEGIES else "horovod"


def provenance(hostnames: list[str]) -> dict[str, Any]:
    rev, dirty = git_revision()
    return {
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "tensorflow": "none",
        "keras": "none",
        "horovod": None,
        "mpi": mpi_library_version(),
        "hostnames": hostnames,
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "git_revision": rev,
        "git_dirty": dirty,
        "argv": list(sys.argv[1:]),
    }


def write_outputs(run_dir: Path, record: dict[str, Any], log: StepLog, ddp: dict[str, Any]) -> None:
    import json

    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(run_dir / "steps.json", encode_steps(log.to_file(0)), durable=True)
    text = json.dumps(ddp, indent=2, sort_keys=True) + "\n"
    atomic_write(run_dir / "ddp.json", text.encode(), durable=True)
    metrics = metrics_from_dict(record)
    atomic_write(run_dir / "metrics.json", encode_metrics(metrics), durable=True)


if __name__ == "__main__":
    sys.exit(main())
