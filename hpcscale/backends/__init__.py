"""Backends: how rendered runs are queued and tracked (slurm, local, dry), behind one interface
(`base.Backend`). None knows about templates; the API picks one by name from REGISTRY.

Adding a scheduler: a module (or package) with a `Backend` subclass and its script part, and
one line in hpcscale.model.registry.SCHEDULERS; the tables below follow from it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from hpcscale.model.errors import UsageError
from hpcscale.model.registry import SCHEDULERS

if TYPE_CHECKING:
    from hpcscale.backends.base import Backend
    from hpcscale.render.render import SchedulerScript

# name -> "module:class", imported on first use (the SLURM backend needs submitit's SLURM parts);
# each scheduler's backend has the scheduler's name, and `dry` renders for any of them
REGISTRY: dict[str, str] = {
    **{name: line.backend for name, line in SCHEDULERS.items()},
    "dry": "hpcscale.backends.dry:DryBackend",
}
# Each scheduler's part of a job script (its header, its hosts line): a module with `context`.
SCRIPTS: dict[str, str] = {name: line.script for name, line in SCHEDULERS.items()}


def script_for(scheduler: str) -> SchedulerScript:
    """The scheduler's part of a job script, for render (which never imports a backend)."""
    return importlib.import_module(SCRIPTS[scheduler])  # type: ignore[return-value]


def backend_class(name: str) -> type[Backend]:
    try:
        module, cls = REGISTRY[name].split(":")
    except KeyError:
        raise UsageError(f"unknown backend {name!r}; known: {', '.join(REGISTRY)}") from None
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]
