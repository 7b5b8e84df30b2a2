"""How ranks are started (srun, mpirun, mpirun_rsh, mpiexec, horovodrun), independent of how
jobs are queued. Adding a launcher: one module with a `Launcher` subclass, one line in
hpcscale.model.registry.LAUNCHERS.
Wrapping a run of a system profile in its launcher is hpcscale.render.launch's job; the profile
checks launcher names against the registry's table, so nothing here imports the profile.
"""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.model.registry import LAUNCHERS, load

REGISTRY: dict[str, Launcher] = {name: load(where)() for name, where in LAUNCHERS.items()}

__all__ = ["REGISTRY", "LaunchRequest", "Launcher", "get"]


def get(name: str) -> Launcher:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown launcher {name!r}; known: {', '.join(REGISTRY)}") from None
