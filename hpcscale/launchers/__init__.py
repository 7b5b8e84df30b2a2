"""How ranks are started (srun, mpirun, mpirun_rsh, mpiexec, horovodrun), independent of how
jobs are queued. Adding a launcher: one module with a `Launcher` subclass, one line in REGISTRY.
Wrapping a run of a system profile in its launcher is hpcscale.render.launch's job: the profile
imports this registry, so nothing here imports the profile.
"""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.launchers.horovodrun import Horovodrun
from hpcscale.launchers.mpiexec import Mpiexec
from hpcscale.launchers.mpirun import Mpirun
from hpcscale.launchers.mpirun_rsh import MpirunRsh
from hpcscale.launchers.srun import Srun

REGISTRY: dict[str, Launcher] = {
    launcher.name: launcher for launcher in (Srun(), Mpirun(), MpirunRsh(), Mpiexec(), Horovodrun())
}

__all__ = ["REGISTRY", "LaunchRequest", "Launcher", "get"]


def get(name: str) -> Launcher:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown launcher {name!r}; known: {', '.join(REGISTRY)}") from None
