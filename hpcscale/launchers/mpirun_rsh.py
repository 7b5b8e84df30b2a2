"""MVAPICH2's mpirun_rsh: always a hostfile (under an allocation its hosts, on this machine
localhost once per rank), environment passed as NAME=value words."""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.launchers.mpirun import HOSTFILE
from hpcscale.util.shell import Raw


class MpirunRsh(Launcher):
    name = "mpirun_rsh"
    reads_hostfile = True
    always_hostfile = True

    def argv(self, req: LaunchRequest) -> list[object]:
        envs = [Raw(f'{name}="${{{name}}}"') for name in req.env_names]
        return [
            "mpirun_rsh",
            "-export",
            "-np",
            req.run.ranks,
            "-hostfile",
            HOSTFILE,
            *req.extra,
            *envs,
            *req.program,
        ]
