"""Every plug-in by name, and where it lives ("module:Class"). Adding a launcher is one module
under launchers/ and one line here; the ground may then name it (a profile's `launcher:` is
checked against these names) without importing it, and launchers/ builds its registry from
this table (hpcscale.launchers.REGISTRY)."""

from __future__ import annotations

import importlib
from typing import Any

LAUNCHERS: dict[str, str] = {
    "srun": "hpcscale.launchers.srun:Srun",
    "mpirun": "hpcscale.launchers.mpirun:Mpirun",
    "mpirun_rsh": "hpcscale.launchers.mpirun_rsh:MpirunRsh",
    "mpiexec": "hpcscale.launchers.mpiexec:Mpiexec",
    "horovodrun": "hpcscale.launchers.horovodrun:Horovodrun",
}


def load(where: str) -> Any:
    """The object a registry line names."""
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)
