#!/usr/bin/env python3
"""Entry point of every hpcscale workload: `python jobs/tf/train.py --model M --run-dir DIR ...`,
one process per rank under mpirun/srun (horovod) or one process (mirrored). See --help."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import NoReturn, Optional

REPO = Path(__file__).resolve().parents[2]  # a checkout, or hpcscale/_data/ when installed
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # run as a script: jobs/tf/'s models/ and datasets/ must not shadow packages
if str(REPO) not in sys.path:  # run as a script: make `jobs` (and `hpcscale`) importable
    sys.path.insert(0, str(REPO))
if REPO.name == "_data" and importlib.util.find_spec("hpcscale") is None:
    # installed jobs/ run by an interpreter without hpcscale: the hpcscale they came with
    sys.path.append(str(REPO.parents[1]))

from hpcscale.model.job_cli import JOB_FLAGS  # noqa: E402
from jobs.tf.config import (  # noqa: E402
    JobConfig,
    JobUsageError,
    gpu_only_message,
    process_world_size,
)
from jobs.tf.manifest import (  # noqa: E402
    ARGS,
    CLASSIFIER_ARGS,
    MODELS,
    STACKGAN_ARGS,
    Arg,
    rule_problem,
)
from jobs.tf.models import workload_of  # noqa: E402

DESCRIPTION = """\
Train one model data-parallel and measure it: epoch wall time, global images/s, losses
(training and validation accuracy for classifiers), step-time percentiles. Rank 0 writes into
--run-dir:
  metrics.json   every figure plus provenance (schema: hpcscale/formats/metrics.py)
  steps.json     each timed step's start/end on the monotonic clock + Unix-epoch anchor
  timeline.json  the Horovod timeline, with --timeline (written node-locally, copied at the end)
  samples/       GANs: a grid from a fixed noise per epoch (samples/epoch_NNN.png)

models: dcgan, sngan, wgan_gp (GANs; --image-size a multiple of 8 below 64 px, of 16 from 64 px)
        resnet50, vgg16 (>= 32 px), inception_v3 (>= 75 px) (tf.keras.applications, weights=None)
        classifier (Keras model.fit + Horovod's Keras API: --backbone, --weights, --fine-tune,
                    --augment; >= 32 px; --strategy horovod)
        stackgan (Stage-I 64 px from text embeddings, --stage 2: x --stage2-factor with
                  residual blocks; synthetic embeddings or --dataset cub)

data (--dataset; sharded by rank, prefetched; input_images_per_s in metrics.json is the
pipeline alone, measured untimed before the burn-in):
  synthetic  noise drawn once per rank and cycled, free per step (default without --data-dir)
  folder     --data-dir with one sub-folder of images per class (default with --data-dir);
             the classes are the sub-folders, --num-classes must match or be left out
  flat       --data-dir of unlabelled images (GANs; CelebA's img_align_celeba/): a centred
             square of --center-crop px (default the shorter side), resized to --image-size
  tfrecord   --data-dir of train-*-of-* TFRecords (image/encoded, image/class/label as
             stored; labelled models need --num-classes); validation-*-of-* is held out
  cub        StackGAN's CUB layout (images, text embeddings, filenames)
  held out:  --val-split F (seeded by --seed; folder: stratified by class) or --val-dir DIR
learning rate: eta = --lr x global_batch / --lr-ref-batch (--lr-scaling linear; sqrt: its
  square root; none: --lr), reached after --warmup-epochs; --lr-ref-batch defaults to
  --batch-per-rank, i.e. lr x replicas
"""

EPILOG = """\
Horovod knobs are environment variables read by hvd.init(), e.g. set by the rendered job script:
  HOROVOD_FUSION_THRESHOLD (bytes), HOROVOD_CYCLE_TIME (ms), HOROVOD_HIERARCHICAL_ALLREDUCE=1,
  HOROVOD_STALL_CHECK_TIME_SECONDS. They are recorded in metrics.json.

exit codes: 0 ok; 1 runtime failure; 2 bad arguments or inputs (one-line message);
            3 --check-sync found different weights on different ranks.

examples:
  mpirun -np 2 python jobs/tf/train.py --model dcgan --run-dir runs/a --batch-per-rank 64 \\
      --epochs 2 --steps-per-epoch 50 --image-size 64 --threads 1 --timeline --check-sync
  python jobs/tf/train.py --model resnet50 --strategy mirrored --cross-device-ops reduce_to_one \\
      --devices 2 --run-dir runs/b --batch-per-rank 8 --image-size 32 --epochs 1
"""


class OneLineParser(argparse.ArgumentParser):
    """Errors as one line (under mpirun every rank prints it; a usage block per rank is noise)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# Parser groups in --help order: the flags hpcscale sets (hpcscale.model.job_cli, shared with
# the renderer) by name; the job's own arguments (jobs/tf/manifest.py, shared with `hpcscale
# validate` and `hpcscale models`) join the group they declare.
GROUPS: dict[str, tuple[str, ...]] = {
    "run": ("model", "run_dir", "batch_per_rank", "epochs", "seed"),
    "data": (),
    "model": ("mixed_precision",),
    "distribution": (
        "strategy",
        "cross_device_ops",
        "devices",
        "fp16_allreduce",
        "device",
        "threads",
    ),
    "timeline (horovod only)": ("timeline", "mark_cycles"),
    "testing": (),
}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="train.py",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    titles = list(GROUPS) + sorted({a.group for a in ARGS.values()} - set(GROUPS))
    for title in titles:
        g = p.add_argument_group(title)
        for name in GROUPS.get(title, ()):
            extra = {"choices": sorted(MODELS)} if name == "model" else {}
            JOB_FLAGS[name].add_to(g, **extra)
        for arg in ARGS.values():
            if arg.group == title:
                _add(g, arg)
    return p


def _add(group: argparse._ArgumentGroup, arg: Arg) -> None:
    """One declared argument: its type and range checked by the declaration's own `convert`."""
    if arg.type == "switch":
        group.add_argument(arg.flag, dest=arg.name, action="store_true", help=arg.help)
        return

    def convert(text: str) -> object:
        try:
            value = arg.convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return Path(value) if arg.type == "path" else value

    convert.__name__ = arg.type  # argparse names the type in its "invalid ... value" errors
    shown = {"metavar": "{" + ",".join(arg.choices) + "}"} if arg.choices else {}
    group.add_argument(
        arg.flag, dest=arg.name, type=convert, default=arg.default, help=arg.help, **shown
    )


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
        dataset=a.dataset,
        val_split=a.val_split,
        val_dir=a.val_dir,
        center_crop=a.center_crop,
        seed=a.seed,
        device=a.device,
        threads=a.threads,
        inter_op_threads=a.inter_op_threads,
        lr=a.lr,
        warmup_epochs=a.warmup_epochs,
        lr_scaling=a.lr_scaling,
        lr_ref_batch=a.lr_ref_batch,
        burn_in_steps=a.burn_in_steps,
        width=a.width,
        latent_dim=a.latent_dim,
        n_critic=a.n_critic,
        gp_weight=a.gp_weight,
        check_sync=a.check_sync,
        debug_desync=a.debug_desync,
        argv=tuple(argv),
        **{c.name: getattr(a, c.name) for c in CLASSIFIER_ARGS},  # JobConfig fields
        **{c.name: getattr(a, c.name) for c in STACKGAN_ARGS},
    )


def _problem(a: argparse.Namespace) -> Optional[str]:
    """Cross-argument checks that need no TensorFlow (so they fail in milliseconds)."""
    if broken := rule_problem(a.model, vars(a)):
        name, why = broken
        return f"{ARGS[name].flag} {getattr(a, name)}: {why}"
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
    for flag, path in (("--data-dir", a.data_dir), ("--val-dir", a.val_dir)):
        if path is not None and not path.is_dir():
            return f"{flag} {path}: not a directory"
    return None


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cfg = config_from_args(args)
    try:
        from jobs.tf.harness import run

        return run(cfg)
    except JobUsageError as exc:
        # one write, newline included: ranks failing together must not glue their lines
        sys.stderr.write(f"train.py: error: {exc}\n")
        sys.stderr.flush()
        return 2


if __name__ == "__main__":
    sys.exit(main())
