"""The bundled TensorFlow programs (jobs/tf/): their path and their command line, shared by the
two TensorFlow frameworks (horovod_tf, tf_distribute)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from hpcscale.model.job_cli import job_argv
from hpcscale.model.resources import jobs_dir
from hpcscale.model.run import Run
from hpcscale.model.system import System, python_of
from hpcscale.model.workloads import TF_PROGRAMS

JOBS_DIR = jobs_dir()  # the bundled jobs root (hpcscale.model.resources: installed or checkout)


@lru_cache(maxsize=256)
def _program_path(jobs_dir: str | None, program: str) -> str:
    """jobs/tf/<program>.py under the profile's `jobs_dir` (a jobs root), else the bundled one."""
    return str((Path(jobs_dir) if jobs_dir else JOBS_DIR) / TF_PROGRAMS / f"{program}.py")


def program_argv(run: Run, system: System, run_dir: str | Path) -> list[object]:
    """The workload command one rank runs (its flags: hpcscale.model.job_cli)."""
    return [
        python_of(system),
        _program_path(system.jobs_dir, run.program),
        *job_argv(
            model=run.model,
            run_dir=os.fspath(run_dir),
            batch_per_rank=run.batch_per_rank,
            epochs=run.epochs,
            device=run.device,
            threads=run.threads_per_task,
            strategy=run.strategy,
            seed=run.repeat,  # repeats differ by seed unless the campaign sweeps it itself
            cross_device_ops=run.knob("cross_device_ops"),
            devices=run.replicas_per_task,
            fp16_allreduce=run.knob("fp16_allreduce"),
            mixed_precision=run.mixed_precision,
            timeline=run.timeline,
            mark_cycles=run.mark_cycles,
            args=job_args(run),
        ),
    ]


def job_args(run: Run) -> dict[str, object]:
    """The campaign's workload arguments, plus `lr_ref_batch` = the run's global batch under
    strong scaling (unless given): the learning rate (jobs/tf/manifest.py `lr_scaling`) then stays
    the same at every scale, while weak scaling grows it with the global batch."""
    if run.scaling != "strong" or "lr_ref_batch" in run.args:
        return run.args
    return {**run.args, "lr_ref_batch": run.global_batch}
