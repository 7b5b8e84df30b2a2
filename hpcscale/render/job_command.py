"""What one rank runs: the workload's command line and the Horovod environment of a run.
Wrapping it in a launcher (srun, mpirun, ...) is hpcscale.launchers' job."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from hpcscale import rankwrap
from hpcscale.model.command import AS_WRITTEN, command_words, placeholder_values
from hpcscale.model.job_cli import job_argv
from hpcscale.model.resources import jobs_dir
from hpcscale.model.run import Run
from hpcscale.model.scaling import fusion_threshold_bytes
from hpcscale.model.system import System, python_of

JOBS_DIR = jobs_dir()  # the bundled programs (hpcscale.model.resources: installed or checkout)
# Run by its path with -I (no user site, no script directory on sys.path): the job's Python
# need not have hpcscale installed, and hpcscale/'s own modules never shadow a stdlib one.
RANKWRAP = str(Path(rankwrap.__file__).resolve())


@lru_cache(maxsize=256)
def _program_path(jobs_dir: str | None, program: str) -> str:
    return str((Path(jobs_dir) if jobs_dir else JOBS_DIR) / f"{program}.py")


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
            cross_device_ops=run.cross_device_ops,
            devices=run.replicas_per_task,
            fp16_allreduce=run.fp16_allreduce,
            mixed_precision=run.mixed_precision,
            timeline=run.timeline,
            mark_cycles=run.mark_cycles,
            args=job_args(run),
        ),
    ]


def job_args(run: Run) -> dict[str, object]:
    """The campaign's workload arguments, plus `lr_ref_batch` = the run's global batch under
    strong scaling (unless given): the learning rate (jobs/manifest.py `lr_scaling`) then stays
    the same at every scale, while weak scaling grows it with the global batch."""
    if run.scaling != "strong" or "lr_ref_batch" in run.args:
        return run.args
    return {**run.args, "lr_ref_batch": run.global_batch}


def horovod_env(run: Run) -> dict[str, object]:
    """Horovod knobs as environment variables (fusion threshold in bytes, cycle time in ms).
    What an MPI flavour needs (HOROVOD_GPU_OPERATIONS=NCCL, MV2_*) comes from its profile."""
    env: dict[str, object] = {}
    if run.fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = fusion_threshold_bytes(run.fusion_threshold_mb)
    if run.cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = run.cycle_time_ms
    if run.hierarchical_allreduce:
        env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = 1
    env["OMP_NUM_THREADS"] = run.threads_per_task
    return env


def command_argv(run: Run, system: System, run_dir: str) -> list[object]:
    """A command workload's words for one rank, placeholders filled (quoted by the renderer),
    run through the per-rank wrapper (hpcscale.rankwrap): each rank's lines are also kept in
    `ranks/<rank>.out`, so extractors read one rank at a time, on every launcher."""
    assert run.command is not None
    python = python_of(system)
    own = None if run.interpreter == AS_WRITTEN else python  # workload.interpreter
    words = command_words(run.command, placeholder_values(run, run_dir), own)
    return [python, "-I", RANKWRAP, "--dir", run_dir, "--", *words]


def command_env(run: Run, run_dir: str) -> dict[str, object]:
    """What a bundled program would switch on itself, given to the user's program through the
    environment Horovod reads: its timeline in the run directory."""
    env: dict[str, object] = {}
    if run.timeline:
        env["HOROVOD_TIMELINE"] = f"{run_dir}/timeline.json"
    if run.mark_cycles:
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = 1
    return env
