"""Open MPI's mpirun: hosts from a hostfile under an allocation, environment forwarded with -x."""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.util.shell import Raw

HOSTFILE = Raw('"$HPCSCALE_HOSTFILE"')


class Mpirun(Launcher):
    name = "mpirun"
    reads_hostfile = True

    def argv(self, req: LaunchRequest) -> list[object]:
        run = req.run
        bind: list[object] = []
        if req.cpu_bind == "cores":
            ppr = f"ppr:{run.tasks_per_node}:node:PE={run.threads_per_task}"
            bind = ["--map-by", ppr, "--bind-to", "core"]
        exports: list[object] = []
        for name in req.env_names:
            exports += ["-x", name]
        hosts: list[object] = ["--hostfile", HOSTFILE] if self.needs_hostfile(req.allocated) else []
        return ["mpirun", "-np", run.ranks, *hosts, *bind, *exports, *req.extra, *req.program]
