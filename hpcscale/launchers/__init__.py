"""How ranks are started (srun, mpirun, mpiexec, a framework's own launcher), independent of how
jobs are queued. Adding a launcher: one module with a `Launcher` subclass, one line in
hpcscale.model.registry.LAUNCHERS.
Wrapping a run of a system profile in its launcher is hpcscale.render.launch's job; the profile
checks launcher names against the registry's table, so nothing here imports the profile.
"""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.model.registry import LAUNCHERS, load

REGISTRY: dict[str, Launcher] = {name: load(where)() for name, where in LAUNCHERS.items()}

__all__ = ["REGISTRY", "LaunchRequest", "Launcher", "get", "implied_strategy"]


def get(name: str) -> Launcher:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown launcher {name!r}; known: {', '.join(REGISTRY)}") from None


def implied_strategy(name: object) -> str | None:
    """The strategy a launcher's name says its program has (Launcher.implies_strategy); None
    for a launcher that starts any program, and for a name that is no launcher's (a table's
    missing value)."""
    launcher = REGISTRY.get(name) if isinstance(name, str) else None
    return None if launcher is None else launcher.implies_strategy
