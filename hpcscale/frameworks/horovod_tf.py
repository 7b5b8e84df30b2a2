"""TensorFlow + Horovod (`strategy: horovod`): one process per rank under an MPI launcher, the
Horovod knobs as its environment, a Horovod timeline as its trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hpcscale.frameworks.base import Cell, Framework, Placement, Starter, knobs_of
from hpcscale.frameworks.checks import Check
from hpcscale.frameworks.horovod_tf_doctor import PROBES, horovod_check
from hpcscale.frameworks.tf_jobs import program_argv
from hpcscale.model.run import Run
from hpcscale.model.scaling import ScalingError, fit_layout
from hpcscale.model.system import System

KNOBS = ("fusion_threshold_mb", "cycle_time_ms", "fp16_allreduce", "hierarchical_allreduce")


def fusion_threshold_bytes(mb: float) -> int:
    """HOROVOD_FUSION_THRESHOLD is in bytes; campaigns speak MB (as horovodrun's flag does)."""
    return round(mb * 1024 * 1024)


def horovod_env(run: Run) -> dict[str, object]:
    """Horovod knobs as environment variables (fusion threshold in bytes, cycle time in ms),
    and the threads of a rank. What an MPI flavour needs (HOROVOD_GPU_OPERATIONS=NCCL, MV2_*)
    comes from its profile."""
    env: dict[str, object] = {}
    if (fusion := run.knob("fusion_threshold_mb")) is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = fusion_threshold_bytes(fusion)
    if (cycle := run.knob("cycle_time_ms")) is not None:
        env["HOROVOD_CYCLE_TIME"] = cycle
    if run.knob("hierarchical_allreduce"):
        env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = 1
    env["OMP_NUM_THREADS"] = run.threads_per_task
    return env


def rank_per_process(cell: Cell, knobs: tuple[str, ...]) -> Placement:
    """One process per rank, as many per node as the layout asks (at most one per GPU)."""
    a, s = cell.a, cell.lc.system
    layout = fit_layout(
        s.cores_per_node,
        device=cell.device,
        layout=a.get("layout"),
        tasks_per_node=a.get("tasks_per_node"),
        threads_per_task=a.get("threads_per_task"),
        gpus_per_node=cell.gpus,
    )
    if "replicas_per_task" in a:
        raise ScalingError(
            "replicas_per_task", "replicas_per_task applies to strategy: mirrored on CPU"
        )
    if "cross_device_ops" in a:
        raise ScalingError("cross_device_ops", "cross_device_ops applies to strategy: mirrored")
    if cell.device == "gpu" and layout.tasks_per_node > cell.gpus:
        raise ScalingError(
            "tasks_per_node", f"{layout.tasks_per_node} ranks per node for {cell.gpus} GPUs"
        )
    return Placement(layout, 1, knobs_of(a, knobs))


class HorovodTF(Framework):
    name: ClassVar[str] = "horovod_tf"
    knobs: ClassVar[tuple[str, ...]] = KNOBS
    trace: ClassVar[str | None] = "horovod"
    python_modules: ClassVar[tuple[str, ...]] = ("tensorflow", "horovod.tensorflow")
    knob_help: ClassVar[Mapping[str, str]] = {
        "fusion_threshold_mb": "Horovod tensor fusion buffer",
        "cycle_time_ms": "Horovod cycle time",
        "fp16_allreduce": "Horovod fp16 compression of gradients",
        "hierarchical_allreduce": "Horovod hierarchical allreduce",
    }
    knob_studies: ClassVar[Mapping[str, str]] = {
        "fusion": "Horovod tensor fusion: HOROVOD_CYCLE_TIME (ms) x HOROVOD_FUSION_THRESHOLD (MB).",
        "precision": (
            "FP16 = Horovod fp16 compression of the gradients; MP = Keras mixed precision."
        ),
        "hierarchical": (
            "HOROVOD_HIERARCHICAL_ALLREDUCE=1 reduces within a node first, then across nodes."
        ),
    }
    env_prefixes: ClassVar[tuple[str, ...]] = ("HOROVOD_", "TF_")
    software: ClassVar[tuple[tuple[str, str], ...]] = (
        ("tensorflow", "TensorFlow"),
        ("keras", "Keras"),
        ("horovod", "Horovod"),
    )
    doctor_probes: ClassVar[Mapping[str, str]] = PROBES
    doctor_words: ClassVar[str | None] = "Horovod (built with MPI, Gloo, NCCL)"
    starter: ClassVar[Starter | None] = Starter(
        ("  fusion_threshold_mb: [64]", "Horovod's tensor fusion buffer (MB): try [16, 64, 128]"),
        "Horovod timelines: the compute/communication split",
        "a Horovod knob",
    )

    def place(self, cell: Cell) -> Placement:
        return rank_per_process(cell, self.knobs)

    def argv(self, run: Run, system: System, run_dir: str) -> list[object]:
        return program_argv(run, system, run_dir)

    def env(self, run: Run, run_dir: str) -> dict[str, object]:
        return horovod_env(run)

    def doctor_check(self, name: str, profile: System, python: str, found: dict[str, Any]) -> Check:
        return horovod_check(profile, found, python)

    def display_name(self, fields: Mapping[str, object]) -> str:
        """Horovod runs by their MPI."""
        return f"Horovod ({fields['mpi']})"
