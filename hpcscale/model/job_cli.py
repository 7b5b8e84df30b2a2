"""The job's command line, defined once: the flags hpcscale sets on `jobs/tf/train.py`.

The renderer builds a rank's argv with `job_argv`; jobs/tf/train.py adds these same flags to its
parser with `JOB_FLAGS[dest].add_to(...)`, so a flag renamed here is renamed on both sides. The
job's own flags (burn-in, data directory, model hyper-parameters, ...) reach it from a campaign's
`args:` as `--flag value` and are defined in jobs/tf/train.py alone.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from hpcscale.model.vocab import CROSS_DEVICE_OPS, DEVICES

TF_STRATEGIES = ("horovod", "mirrored")  # the TensorFlow programs' (jobs/torch/ has its own)
DEFAULT_CROSS_DEVICE_OPS = "reduce_to_one"  # what a mirrored run reduces with unless told


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


@dataclass(frozen=True)
class Flag:
    """One option of the job. `type` None makes a switch (present means True)."""

    flag: str
    dest: str
    help: str
    type: Optional[Callable[[str], Any]] = None
    default: Any = None
    choices: Optional[tuple[str, ...]] = None
    required: bool = False

    def add_to(self, parser: Any, **extra: Any) -> argparse.Action:
        """Add to an ArgumentParser or argument group; `extra` adds what only the job knows
        (e.g. the model names as choices)."""
        kwargs: dict[str, Any] = {"dest": self.dest, "help": self.help}
        if self.type is None:
            kwargs["action"] = "store_true"
        else:
            kwargs.update(type=self.type, default=self.default)
            if self.choices is not None:
                kwargs["choices"] = list(self.choices)
            if self.required:
                kwargs["required"] = True
        kwargs.update(extra)
        return parser.add_argument(self.flag, **kwargs)


def _flags(*flags: Flag) -> dict[str, Flag]:
    return {f.dest: f for f in flags}


JOB_FLAGS: dict[str, Flag] = _flags(
    Flag("--model", "model", "network to train", str, required=True),
    Flag("--run-dir", "run_dir", "where rank 0 writes its outputs", Path, required=True),
    Flag(
        "--batch-per-rank",
        "batch_per_rank",
        "images per rank per step (per device under mirrored); default 32",
        positive,
        32,
    ),
    Flag("--epochs", "epochs", "timed epochs; default 1", positive, 1),
    Flag(
        "--device",
        "device",
        "cpu hides GPUs; gpu pins one GPU per local rank; default cpu",
        str,
        "cpu",
        DEVICES,
    ),
    Flag(
        "--threads",
        "threads",
        "TensorFlow intra-op (and tf.data) threads per rank; default: all cores",
        positive,
    ),
    Flag(
        "--strategy",
        "strategy",
        "horovod: one process per rank (mpirun/srun); mirrored: one process, "
        "tf.distribute.MirroredStrategy over --devices; default horovod",
        str,
        "horovod",
        TF_STRATEGIES,
    ),
    Flag("--seed", "seed", "rank r seeds with seed + r; default 42", int, 42),
    Flag(
        "--cross-device-ops",
        "cross_device_ops",
        "mirrored only: gradient reduction (nccl and hierarchical_copy need "
        f"GPUs); default {DEFAULT_CROSS_DEVICE_OPS}",
        str,
        None,
        CROSS_DEVICE_OPS,
    ),
    Flag(
        "--devices",
        "devices",
        "mirrored only: replicas (GPUs, or logical CPU devices with --device cpu); default 1",
        positive,
    ),
    Flag(
        "--fp16-allreduce",
        "fp16_allreduce",
        "horovod only: compress gradients to float16 on the wire",
    ),
    Flag(
        "--mixed-precision",
        "mixed_precision",
        "tf.keras.mixed_precision: mixed_float16 + loss scaling on GPU, mixed_bfloat16 on CPU",
    ),
    Flag(
        "--timeline",
        "timeline",
        "record the Horovod timeline node-locally, copy to RUN_DIR/timeline.json",
    ),
    Flag(
        "--mark-cycles",
        "mark_cycles",
        "mark Horovod cycles in the timeline (HOROVOD_TIMELINE_MARK_CYCLES=1)",
    ),
)

_F = {dest: f.flag for dest, f in JOB_FLAGS.items()}
_SWITCHES = tuple(_F[d] for d in ("fp16_allreduce", "mixed_precision", "timeline", "mark_cycles"))


def flag_of(name: str) -> str:
    """A workload argument's flag: `image_size` -> `--image-size`."""
    return "--" + name.replace("_", "-")


def job_argv(
    *,
    model: str,
    run_dir: Union[str, os.PathLike[str]],
    batch_per_rank: int,
    epochs: int,
    device: str,
    threads: int,
    strategy: str = "horovod",
    seed: Optional[int] = None,
    cross_device_ops: Optional[str] = None,
    devices: int = 1,
    fp16_allreduce: bool = False,
    mixed_precision: bool = False,
    timeline: bool = False,
    mark_cycles: bool = False,
    args: Optional[Mapping[str, Any]] = None,
) -> list[object]:
    """The arguments after `python jobs/<framework>/<program>.py`, values as given (quoted later).

    `seed` is left out when `args` has its own (a campaign that sweeps the seed); the mirrored
    flags are written only for `strategy="mirrored"`; a workload argument True is a bare
    switch, False is left out, anything else is `--flag value`, in sorted order."""
    args = args or {}
    # This order is the rendered scripts' order: changing it changes every job script.
    argv: list[object] = [
        _F["model"], model,
        _F["run_dir"], os.fspath(run_dir),
        _F["batch_per_rank"], batch_per_rank,
        _F["epochs"], epochs,
        _F["device"], device,
        _F["threads"], threads,
        _F["strategy"], strategy,
    ]  # fmt: skip
    if seed is not None and "seed" not in args:
        argv += [_F["seed"], seed]
    if strategy == "mirrored":
        ops = cross_device_ops or DEFAULT_CROSS_DEVICE_OPS
        argv += [_F["cross_device_ops"], ops, _F["devices"], devices]
    switches = (fp16_allreduce, mixed_precision, timeline, mark_cycles)
    argv += [flag for flag, on in zip(_SWITCHES, switches) if on]
    for key, value in sorted(args.items()):
        if value is True:
            argv.append(flag_of(key))
        elif value is not False:
            argv += [flag_of(key), value]
    return argv
