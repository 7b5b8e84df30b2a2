"""How ranks are started (srun, mpirun, mpirun_rsh, horovodrun), independent of how jobs queue."""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

from hpcscale.core.run import Run
from hpcscale.core.scaling import fusion_threshold_bytes
from hpcscale.core.shell import Raw
from hpcscale.core.system import System

REPO_JOBS = Path(__file__).resolve().parents[2] / "jobs"


def python_of(system: System) -> str:
    return sys.executable if system.python == "auto" else system.python


@lru_cache(maxsize=256)
def _program_path(jobs_dir: str | None, workload: str) -> str:
    return str((Path(jobs_dir) if jobs_dir else REPO_JOBS) / f"{workload}.py")


def program_argv(run: Run, system: System, run_dir: str | Path) -> list[object]:
    """The workload command one rank runs."""
    argv: list[object] = [
        python_of(system),
        _program_path(system.jobs_dir, run.workload),
        "--model",
        run.model,
        "--run-dir",
        os.fspath(run_dir),
        "--batch-per-rank",
        run.batch_per_rank,
        "--epochs",
        run.epochs,
        "--device",
        run.device,
        "--threads",
        run.threads_per_task,
        "--strategy",
        run.strategy,
    ]
    if "seed" not in run.args:  # repeats differ by seed unless the campaign sweeps it itself
        argv += ["--seed", run.repeat]
    if run.strategy == "mirrored":
        argv += [
            "--cross-device-ops",
            run.cross_device_ops or "reduce_to_one",
            "--devices",
            run.replicas_per_task,
        ]
    for flag, on in (
        ("--fp16-allreduce", run.fp16_allreduce),
        ("--mixed-precision", run.mixed_precision),
        ("--timeline", run.timeline),
        ("--mark-cycles", run.mark_cycles),
    ):
        if on:
            argv.append(flag)
    for key, value in sorted(run.args.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not False:
            argv += [flag, value]
    return argv


def horovod_env(run: Run) -> dict[str, object]:
    """Horovod knobs as environment variables (fusion threshold in bytes, cycle time in ms)."""
    env: dict[str, object] = {}
    if run.fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = fusion_threshold_bytes(run.fusion_threshold_mb)
    if run.cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = run.cycle_time_ms
    if run.hierarchical_allreduce:
        env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = 1
    if run.device == "gpu" and run.mpi == "nccl":
        env["HOROVOD_GPU_OPERATIONS"] = "NCCL"
    env["OMP_NUM_THREADS"] = run.threads_per_task
    return env


def needs_hostfile(run: Run, system: System) -> bool:
    """Launchers that take their hosts from a file, under a scheduler that hands out nodes: the
    job script writes $HPCSCALE_HOSTFILE (and $HPCSCALE_HOSTS) before the launch."""
    return system.scheduler == "slurm" and run.launcher in ("mpirun", "mpirun_rsh", "horovodrun")


def launch_argv(
    run: Run, system: System, program: list[object], env_names: list[str]
) -> list[object]:
    """Wrap `program` in the run's launcher. `env_names` must reach every rank."""
    n, ppn, cpt = run.ranks, run.tasks_per_node, run.threads_per_task
    own = system.flavour(run.mpi).launcher_args
    extra: list[object] = list(system.launcher_args if own is None else own)
    if run.strategy == "mirrored" and run.ranks == 1:
        return program  # one process drives all devices: no MPI launcher needed
    match run.launcher:
        case "srun":
            bind = [f"--cpu-bind={system.cpu_bind}"] if system.cpu_bind != "none" else []
            return [
                "srun",
                f"--mpi={system.srun_mpi}",
                f"--nodes={run.nodes}",
                f"--ntasks={n}",
                f"--ntasks-per-node={ppn}",
                f"--cpus-per-task={cpt}",
                *bind,
                *extra,
                *program,
            ]
        case "mpirun":
            bind = (
                ["--map-by", f"ppr:{ppn}:node:PE={cpt}", "--bind-to", "core"]
                if system.cpu_bind == "cores"
                else []
            )
            exports: list[object] = []
            for name in env_names:
                exports += ["-x", name]
            hosts: list[object] = []
            if needs_hostfile(run, system):
                hosts = ["--hostfile", Raw('"$HPCSCALE_HOSTFILE"')]
            return ["mpirun", "-np", n, *hosts, *bind, *exports, *extra, *program]
        case "mpirun_rsh":
            envs = [Raw(f'{name}="${{{name}}}"') for name in env_names]
            return [
                "mpirun_rsh",
                "-export",
                "-np",
                n,
                "-hostfile",
                Raw('"$HPCSCALE_HOSTFILE"'),
                *extra,
                *envs,
                *program,
            ]
        case "horovodrun":
            knobs: list[object] = []
            if run.fusion_threshold_mb is not None:
                knobs += ["--fusion-threshold-mb", run.fusion_threshold_mb]  # MB here, not bytes
            if run.cycle_time_ms is not None:
                knobs += ["--cycle-time-ms", run.cycle_time_ms]
            if run.hierarchical_allreduce:
                knobs.append("--hierarchical-allreduce")
            # horovodrun is the console script of this module: through the job's Python it needs
            # nothing on PATH (a venv need not be activated)
            return [
                python_of(system),
                "-m",
                "horovod.runner.launch",
                "-np",
                n,
                "-H",
                Raw('"$HPCSCALE_HOSTS"') if needs_hostfile(run, system) else f"localhost:{n}",
                *knobs,
                *extra,
                *program,
            ]
    raise ValueError(f"unknown launcher {run.launcher!r}")
