"""TensorFlow's MirroredStrategy (`strategy: mirrored`): one process on one node drives every
device; it needs no launcher and writes no Horovod timeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from hpcscale.frameworks.base import Cell, Framework, Placement, knobs_of
from hpcscale.frameworks.horovod_tf import horovod_env
from hpcscale.frameworks.tf_jobs import program_argv
from hpcscale.model.job_cli import DEFAULT_CROSS_DEVICE_OPS
from hpcscale.model.run import Run
from hpcscale.model.scaling import ScalingError, fit_layout
from hpcscale.model.system import System

# Horovod's knobs are accepted on a mirrored cell (they change nothing there) as before, so a
# campaign sweeping both strategies needs no exclude rule; fp16_allreduce alone is refused.
KNOBS = ("cross_device_ops", "fusion_threshold_mb", "cycle_time_ms", "hierarchical_allreduce")
# Ahmad & Cai name MirroredStrategy runs by their cross-device op
CROSS_DEVICE_NAMES = {
    "nccl": "NcclAllReduce",
    "reduce_to_one": "ReductionToOneDevice",
    "hierarchical_copy": "HierarchicalCopy",
}


class TFDistribute(Framework):
    name: ClassVar[str] = "tf_distribute"
    knobs: ClassVar[tuple[str, ...]] = KNOBS
    trace: ClassVar[str | None] = None
    python_modules: ClassVar[tuple[str, ...]] = ("tensorflow",)
    knob_help: ClassVar[Mapping[str, str]] = {
        "cross_device_ops": "nccl | reduce_to_one | hierarchical_copy (mirrored)"
    }
    env_prefixes: ClassVar[tuple[str, ...]] = ("TF_",)
    software: ClassVar[tuple[tuple[str, str], ...]] = (
        ("tensorflow", "TensorFlow"),
        ("keras", "Keras"),
    )

    def place(self, cell: Cell) -> Placement:
        a, s = cell.a, cell.lc.system
        _refused(cell)
        layout = fit_layout(
            s.cores_per_node,
            device=cell.device,
            tasks_per_node=1,
            threads_per_task=a.get("threads_per_task"),
        )
        replicas = cell.gpus if cell.device == "gpu" else int(a.get("replicas_per_task", 1))
        knobs = knobs_of(a, self.knobs)
        if "cross_device_ops" not in knobs:  # what the program would pick, written down
            knobs["cross_device_ops"] = "nccl" if cell.device == "gpu" else DEFAULT_CROSS_DEVICE_OPS
        return Placement(layout, replicas, knobs)

    def argv(self, run: Run, system: System, run_dir: str) -> list[object]:
        return program_argv(run, system, run_dir)

    def env(self, run: Run, run_dir: str) -> dict[str, object]:
        return horovod_env(run)  # the threads of the process (the Horovod knobs do nothing)

    def single_process(self, run: Run) -> bool:
        return run.ranks == 1

    def display_name(self, fields: Mapping[str, object]) -> str:
        return CROSS_DEVICE_NAMES.get(str(fields["cross_device_ops"]), "MirroredStrategy")


def _refused(cell: Cell) -> None:
    """What jobs/tf/train.py refuses under --strategy mirrored (one process on one node)."""
    a = cell.a
    if cell.nodes > 1:
        raise ScalingError("nodes", "strategy: mirrored runs one process on one node (nodes: 1)")
    if cell.lc.campaign.collect.timeline:
        raise ScalingError(
            "strategy",
            "strategy: mirrored records no Horovod timeline; set collect.timeline: false",
            key=("collect", "timeline"),
        )
    if a.get("fp16_allreduce"):
        raise ScalingError("fp16_allreduce", "fp16_allreduce is Horovod's: strategy: horovod")
    if cell.device == "gpu" and "replicas_per_task" in a:
        raise ScalingError(
            "replicas_per_task",
            "on GPUs a mirrored run drives gpus_per_node devices; replicas_per_task is for CPU",
        )
    ops = a.get("cross_device_ops")
    if cell.device == "cpu" and ops in ("nccl", "hierarchical_copy"):
        raise ScalingError("cross_device_ops", f"cross_device_ops {ops} needs device: gpu")
