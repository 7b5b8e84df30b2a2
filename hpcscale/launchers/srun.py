"""SLURM's own launcher: ranks, placement and binding come from the allocation."""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest


class Srun(Launcher):
    name = "srun"

    def argv(self, req: LaunchRequest) -> list[object]:
        run = req.run
        bind = [f"--cpu-bind={req.cpu_bind}"] if req.cpu_bind != "none" else []
        return [
            "srun",
            f"--mpi={req.srun_mpi}",
            f"--nodes={run.nodes}",
            f"--ntasks={run.ranks}",
            f"--ntasks-per-node={run.tasks_per_node}",
            f"--cpus-per-task={run.threads_per_task}",
            *bind,
            *req.extra,
            *req.program,
        ]
