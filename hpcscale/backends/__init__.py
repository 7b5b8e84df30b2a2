"""Backends: how rendered runs are queued and tracked (slurm, local, dry), behind one interface
(`base.Backend`). None knows about templates; the API picks one by name from REGISTRY.

Adding a backend: a module with a `Backend` subclass, and one line below."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpcscale.backends.base import Backend
    from hpcscale.render.render import SchedulerScript

# name -> "module:class", imported on first use (the SLURM backend needs submitit's SLURM parts)
REGISTRY: dict[str, str] = {
    "local": "hpcscale.backends.local:LocalBackend",
    "slurm": "hpcscale.backends.slurm.backend:SlurmBackend",
    "dry": "hpcscale.backends.dry:DryBackend",
}
# The backend that runs a system's jobs, by the profile's `scheduler:`.
FOR_SCHEDULER: dict[str, str] = {"slurm": "slurm", "local": "local"}
# Each scheduler's part of a job script (its header, its hosts line): a module with `context`.
SCRIPTS: dict[str, str] = {
    "slurm": "hpcscale.backends.slurm.script",
    "local": "hpcscale.backends.local_script",
}


def script_for(scheduler: str) -> SchedulerScript:
    """The scheduler's part of a job script, for render (which never imports a backend)."""
    return importlib.import_module(SCRIPTS[scheduler])  # type: ignore[return-value]


def backend_class(name: str) -> type[Backend]:
    from hpcscale.model.errors import UsageError

    try:
        module, cls = REGISTRY[name].split(":")
    except KeyError:
        raise UsageError(f"unknown backend {name!r}; known: {', '.join(REGISTRY)}") from None
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]
