"""MPICH / Intel MPI's Hydra `mpiexec`: the environment is passed on by default."""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.launchers.mpirun import HOSTFILE


class Mpiexec(Launcher):
    name = "mpiexec"
    reads_hostfile = True

    def argv(self, req: LaunchRequest) -> list[object]:
        run = req.run
        hosts: list[object] = ["-f", HOSTFILE] if self.needs_hostfile(req.allocated) else []
        return [
            "mpiexec",
            "-n",
            run.ranks,
            "-ppn",
            run.tasks_per_node,
            *hosts,
            *req.extra,
            *req.program,
        ]
