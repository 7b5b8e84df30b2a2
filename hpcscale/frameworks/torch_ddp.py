"""PyTorch DistributedDataParallel (`strategy: torch_ddp`): one process per rank, started by
srun, mpirun or torchrun, joining over a rendezvous the job script sets up (MASTER_ADDR,
MASTER_PORT: hpcscale.backends' `rendezvous` lines). The bundled programs are jobs/torch/, with
the TensorFlow programs' batch arithmetic and outputs; DDP's own knobs are its axes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from hpcscale.frameworks.base import Cell, Framework, Placement
from hpcscale.frameworks.horovod_tf import rank_per_process
from hpcscale.frameworks.tf_jobs import job_args
from hpcscale.model.campaign import TraceWindow
from hpcscale.model.job_cli import job_argv
from hpcscale.model.resources import jobs_dir
from hpcscale.model.run import Run
from hpcscale.model.scaling import ScalingError
from hpcscale.model.system import System, python_of
from hpcscale.model.validation import did_you_mean
from hpcscale.model.workloads import Declaration

KNOBS = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "fp16_compress")
# each knob's flag on jobs/torch/train.py (a switch when the knob is a bool)
KNOB_FLAGS = {
    "bucket_cap_mb": "--bucket-cap-mb",
    "gradient_as_bucket_view": "--gradient-as-bucket-view",
    "static_graph": "--static-graph",
    "fp16_compress": "--fp16-compress",
}
PROGRAM = ("torch", "train.py")  # under jobs/
BUNDLED = jobs_dir()  # the bundled jobs/ (installed or checkout), looked up once
TRACE_WINDOW = TraceWindow().model_dump()  # a run rendered without one: the defaults
# What jobs/torch/train.py has (a test checks these against its parser): a campaign value it
# would refuse is refused by `validate`, not by a failed job.
MODELS = ("dcgan", "resnet50", "vgg16", "classifier")
ARGS = (
    "image_size", "num_classes", "dataset", "dataset_size", "steps_per_epoch", "burn_in_steps",
    "width", "latent_dim", "backbone", "lr", "lr_scaling", "lr_ref_batch", "warmup_epochs",
    "check_sync", "backend", "data_dir",
)  # fmt: skip


def program_path(system: System) -> str:
    base = Path(system.jobs_dir) if system.jobs_dir else BUNDLED
    return os.fspath(base.joinpath(*PROGRAM))


def knob_argv(run: Run) -> list[object]:
    out: list[object] = []
    for name in KNOBS:
        value = run.knob(name)
        if value is None or value is False:
            continue
        out += [KNOB_FLAGS[name]] if value is True else [KNOB_FLAGS[name], value]
    return out


def trace_argv(run: Run) -> list[object]:
    """--timeline and its window (collect.trace_window) when the run traces; nothing else."""
    if not run.timeline:
        return []
    window = run.trace_window or TRACE_WINDOW
    return ["--timeline", "--trace-skip", window["skip"], "--trace-steps", window["steps"]]


def workload_problem(model: Any, args: dict[str, Any]) -> tuple[str, str] | None:
    """(key, why) for a model or argument jobs/torch/train.py would refuse, or None."""
    if model not in MODELS:
        return "model", (
            f"strategy: torch_ddp has no model {model!r}{did_you_mean(str(model), MODELS)}; "
            f"the PyTorch programs (jobs/torch/) have: {', '.join(MODELS)}"
        )
    for name in args:
        if name not in ARGS:
            return f"args.{name}", (
                f"jobs/torch/train.py has no argument {name!r}{did_you_mean(name, ARGS)} "
                f"(strategy: torch_ddp); its arguments: {', '.join(ARGS)}"
            )
    return None


class TorchDDP(Framework):
    name: ClassVar[str] = "torch_ddp"
    knobs: ClassVar[tuple[str, ...]] = KNOBS
    trace: ClassVar[str | None] = "torch"  # RUN_DIR/traces/rank<r>.json (torch.profiler)
    rendezvous: ClassVar[bool] = True
    python_modules: ClassVar[tuple[str, ...]] = ("torch",)
    knob_help: ClassVar[Mapping[str, str]] = {
        "bucket_cap_mb": "DDP gradient bucket (torch_ddp)",
        "gradient_as_bucket_view": "DDP gradients alias the buckets (torch_ddp)",
        "static_graph": "DDP static_graph (torch_ddp)",
        "fp16_compress": "DDP fp16_compress_hook on the gradients (torch_ddp)",
    }
    own_program_label: ClassVar[str | None] = "PyTorch DDP"

    def place(self, cell: Cell) -> Placement:
        a = cell.a
        if a.get("mixed_precision"):
            raise ScalingError("mixed_precision", "the PyTorch programs have no mixed precision")
        return rank_per_process(cell, self.knobs)

    def display_name(self, fields: Mapping[str, object]) -> str:
        """DDP runs by their launcher (gloo or NCCL, whichever MPI ran around it)."""
        return f"PyTorch DDP ({fields.get('launcher') or 'mpirun'})"

    def workload_problem(
        self, model: Any, args: dict[str, Any], decl: Declaration
    ) -> tuple[str, str] | None:
        return workload_problem(model, args)

    def argv(self, run: Run, system: System, run_dir: str) -> list[object]:
        return [
            python_of(system),
            program_path(system),
            *job_argv(
                model=run.model,
                run_dir=run_dir,
                batch_per_rank=run.batch_per_rank,
                epochs=run.epochs,
                device=run.device,
                threads=run.threads_per_task,
                strategy=run.strategy,
                seed=run.repeat,
                args=job_args(run),
            ),
            *knob_argv(run),
            *trace_argv(run),
        ]

    def env(self, run: Run, run_dir: str) -> dict[str, object]:
        # torchrun would set 1 thread per process; the layout's threads are what was asked
        return {"OMP_NUM_THREADS": run.threads_per_task}
