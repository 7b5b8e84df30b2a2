"""How ranks are started (srun, mpirun, mpirun_rsh, mpiexec, horovodrun), independent of how
jobs are queued. Adding a launcher: one module with a `Launcher` subclass, one line in REGISTRY.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcscale.launchers.base import Launcher, LaunchRequest, python_of
from hpcscale.launchers.horovodrun import Horovodrun
from hpcscale.launchers.mpiexec import Mpiexec
from hpcscale.launchers.mpirun import Mpirun
from hpcscale.launchers.mpirun_rsh import MpirunRsh
from hpcscale.launchers.srun import Srun

if TYPE_CHECKING:
    from hpcscale.core.run import Run
    from hpcscale.core.system import System

REGISTRY: dict[str, Launcher] = {
    launcher.name: launcher for launcher in (Srun(), Mpirun(), MpirunRsh(), Mpiexec(), Horovodrun())
}

__all__ = [
    "REGISTRY",
    "LaunchRequest",
    "Launcher",
    "get",
    "launch_argv",
    "needs_hostfile",
    "python_of",
]


def get(name: str) -> Launcher:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown launcher {name!r}; known: {', '.join(REGISTRY)}") from None


def needs_hostfile(run: Run, system: System) -> bool:
    """The job script writes $HPCSCALE_HOSTFILE (and $HPCSCALE_HOSTS) before the launch."""
    return get(run.launcher).needs_hostfile(system.allocates_nodes)


def _single_process(run: Run) -> bool:
    return run.strategy == "mirrored" and run.ranks == 1


def launch_argv(
    run: Run, system: System, program: list[object], env_names: list[str]
) -> list[object]:
    """Wrap `program` in the run's launcher. `env_names` must reach every rank."""
    if _single_process(run):
        return program  # one process drives all devices: no MPI launcher needed
    own = system.flavour(run.mpi).launcher_args
    extra: list[object] = list(system.launcher_args if own is None else own)
    req = LaunchRequest(run, system, program, env_names, extra, system.allocates_nodes)
    return get(run.launcher).argv(req)
