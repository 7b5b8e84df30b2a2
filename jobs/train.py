#!/usr/bin/env python3
"""Entry point of every hpcscale workload: `python jobs/train.py --model M --run-dir DIR ...`,
one process per rank under mpirun/srun (horovod) or one process (mirrored). See --help."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make `jobs` (and `hpcscale`) importable
    sys.path.insert(0, str(REPO))

from hpcscale.formats.job_cli import (  # noqa: E402
    JOB_FLAGS,
    non_negative,
    non_negative_float,
    positive,
    positive_float,
)
from jobs.config import (  # noqa: E402
    JobConfig,
    JobUsageError,
    gan_image_size_problem,
    gpu_only_message,
    process_world_size,
)
from jobs.models import MODELS, min_image_size, workload_of  # noqa: E402

DESCRIPTION = """\
Train one model data-parallel and measure it: epoch wall time, global images/s, losses
(accuracy for CNNs), step-time percentiles. Rank 0 writes into --run-dir:
  metrics.json   every figure plus provenance (schema: hpcscale/formats/metrics.py)
  steps.json     each timed step's start/end on the monotonic clock + Unix-epoch anchor
  timeline.json  the Horovod timeline, with --timeline (written node-locally, copied at the end)

models: dcgan, sngan, wgan_gp (GANs; --image-size a multiple of 8 below 64 px, of 16 from 64 px)
        resnet50, vgg16 (>= 32 px), inception_v3 (>= 75 px) (tf.keras.applications, weights=None)
"""

EPILOG = """\
Horovod knobs are environment variables read by hvd.init(), e.g. set by the rendered job script:
  HOROVOD_FUSION_THRESHOLD (bytes), HOROVOD_CYCLE_TIME (ms), HOROVOD_HIERARCHICAL_ALLREDUCE=1,
  HOROVOD_STALL_CHECK_TIME_SECONDS. They are recorded in metrics.json.

exit codes: 0 ok; 1 runtime failure; 2 bad arguments or inputs (one-line message);
            3 --check-sync found different weights on different ranks.

examples:
  mpirun -np 2 python jobs/train.py --model dcgan --run-dir runs/a --batch-per-rank 64 \\
      --epochs 2 --steps-per-epoch 50 --image-size 64 --threads 1 --timeline --check-sync
  python jobs/train.py --model resnet50 --strategy mirrored --cross-device-ops reduce_to_one \\
      --devices 2 --run-dir runs/b --batch-per-rank 8 --image-size 32 --epochs 1
"""


class OneLineParser(argparse.ArgumentParser):
    """Errors as one line (under mpirun every rank prints it; a usage block per rank is noise)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="train.py",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("run")
    f = JOB_FLAGS  # the flags hpcscale sets, defined with the renderer's side (job_argv)
    f["model"].add_to(g, choices=sorted(MODELS))
    f["run_dir"].add_to(g)
    f["batch_per_rank"].add_to(g)
    f["epochs"].add_to(g)
    g.add_argument(
        "--steps-per-epoch",
        type=positive,
        default=None,
        help="steps per epoch; default dataset size // global batch",
    )
    g.add_argument(
        "--burn-in-steps",
        type=non_negative,
        default=1,
        help="untimed training steps before epoch 1 (graph tracing); default 1",
    )
    f["seed"].add_to(g)
    g.add_argument(
        "--check-sync",
        action="store_true",
        help="after training, compare a digest of all weights and optimizer state "
        "across ranks/replicas; exit 3 if they differ",
    )

    g = p.add_argument_group("data")
    g.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="class-per-folder image directory, sharded by rank (default: synthetic)",
    )
    g.add_argument(
        "--dataset-size",
        type=positive,
        default=None,
        help="images per epoch, all ranks together (synthetic default: steps x "
        "global batch, else 8192; with --data-dir: a seeded subset)",
    )
    g.add_argument("--image-size", type=positive, default=64, help="square images, px; default 64")
    g.add_argument("--num-classes", type=positive, default=10, help="CNN classes; default 10")

    g = p.add_argument_group("model")
    g.add_argument(
        "--lr",
        type=positive_float,
        default=None,
        help="base learning rate per replica (default per model: GANs 2e-4, "
        "wgan_gp 1e-4, CNNs 0.0125); scaled by the replica count",
    )
    g.add_argument(
        "--warmup-epochs",
        type=non_negative_float,
        default=0.0,
        help="ramp the learning rate linearly from --lr to --lr x replicas; default 0",
    )
    g.add_argument(
        "--width",
        type=positive,
        default=64,
        help="GAN base channel width (DCGAN paper: 64); default 64",
    )
    g.add_argument("--latent-dim", type=positive, default=100, help="GAN noise size; default 100")
    g.add_argument(
        "--n-critic",
        type=positive,
        default=5,
        help="wgan_gp critic updates per generator update; default 5",
    )
    g.add_argument(
        "--gp-weight",
        type=non_negative_float,
        default=10.0,
        help="wgan_gp gradient-penalty weight; default 10",
    )
    f["mixed_precision"].add_to(g)

    g = p.add_argument_group("distribution")
    for name in ("strategy", "cross_device_ops", "devices", "fp16_allreduce", "device", "threads"):
        f[name].add_to(g)
    g.add_argument(
        "--inter-op-threads",
        type=positive,
        default=None,
        help="TensorFlow inter-op threads per rank; default: TensorFlow's choice",
    )

    g = p.add_argument_group("timeline (horovod only)")
    f["timeline"].add_to(g)
    f["mark_cycles"].add_to(g)
    g.add_argument(
        "--timeline-dir",
        type=Path,
        default=None,
        help="node-local directory for the live timeline; default $TMPDIR or /tmp",
    )

    g = p.add_argument_group("testing")
    g.add_argument(
        "--debug-desync",
        action="store_true",
        help="perturb rank 1's weights before the sync check (must then exit 3)",
    )
    return p


def config_from_args(argv: list[str]) -> JobConfig:
    parser = build_parser()
    a = parser.parse_args(argv)
    problem = _problem(a)
    if problem:
        parser.error(problem)
    try:
        a.run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--run-dir {a.run_dir}: cannot create ({exc.strerror})")
    return JobConfig(
        model=a.model,
        workload=workload_of(a.model),
        run_dir=a.run_dir,
        batch_per_rank=a.batch_per_rank,
        epochs=a.epochs,
        steps_per_epoch=a.steps_per_epoch,
        dataset_size=a.dataset_size,
        image_size=a.image_size,
        num_classes=a.num_classes,
        strategy=a.strategy,
        cross_device_ops=a.cross_device_ops,
        devices=a.devices or 1,
        fp16_allreduce=a.fp16_allreduce,
        mixed_precision=a.mixed_precision,
        timeline=a.timeline,
        mark_cycles=a.mark_cycles,
        timeline_dir=a.timeline_dir,
        data_dir=a.data_dir,
        seed=a.seed,
        device=a.device,
        threads=a.threads,
        inter_op_threads=a.inter_op_threads,
        lr=a.lr,
        warmup_epochs=a.warmup_epochs,
        burn_in_steps=a.burn_in_steps,
        width=a.width,
        latent_dim=a.latent_dim,
        n_critic=a.n_critic,
        gp_weight=a.gp_weight,
        check_sync=a.check_sync,
        debug_desync=a.debug_desync,
        argv=tuple(argv),
    )


def _problem(a: argparse.Namespace) -> str | None:
    """Cross-argument checks that need no TensorFlow (so they fail in milliseconds)."""
    if a.image_size < min_image_size(a.model):
        return f"--image-size {a.image_size}: {a.model} needs at least {min_image_size(a.model)} px"
    if workload_of(a.model) == "gan" and (msg := gan_image_size_problem(a.image_size)):
        return f"--image-size: {msg}"
    if a.strategy == "horovod":
        for flag, value in (("--cross-device-ops", a.cross_device_ops), ("--devices", a.devices)):
            if value is not None:
                return f"{flag} is for --strategy mirrored (horovod uses one process per rank)"
    else:
        for flag, value in (
            ("--timeline", a.timeline),
            ("--mark-cycles", a.mark_cycles),
            ("--fp16-allreduce", a.fp16_allreduce),
            ("--debug-desync", a.debug_desync),
        ):
            if value:
                return f"{flag} needs --strategy horovod"
        if (n := process_world_size()) > 1:
            return f"--strategy mirrored runs as one process, but the launcher started {n} ranks"
        if a.device == "cpu" and a.cross_device_ops in ("nccl", "hierarchical_copy"):
            return gpu_only_message(a.cross_device_ops)
    if a.mark_cycles and not a.timeline:
        return "--mark-cycles needs --timeline"
    if a.data_dir is not None and not a.data_dir.is_dir():
        return f"--data-dir {a.data_dir}: not a directory"
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cfg = config_from_args(args)
    try:
        from jobs.harness import run

        return run(cfg)
    except JobUsageError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
