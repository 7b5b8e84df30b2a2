"""Whether a backend can run a system's job scripts, and what to do instead when it cannot.

A script is rendered for its system's scheduler: one for `scheduler: local` carries no #SBATCH
resource lines (sbatch would queue every run in one mis-sized allocation, 1- and 2-rank runs
alike), and one for `scheduler: slurm` reads its allocation (hostfile, SLURM variables) and loads
the site's modules, neither of which this machine has outside a job. So a backend runs only the
scripts of the schedulers it serves; `dry` only prints, so it fits every system.
"""

from __future__ import annotations

import shutil

from hpcscale.backends import REGISTRY
from hpcscale.model.errors import UsageError
from hpcscale.model.system import System

# backend -> the system schedulers whose scripts it runs (None: any)
SERVES: dict[str, frozenset[str] | None] = {
    "local": frozenset({"local"}),
    "slurm": frozenset({"slurm"}),
    "dry": None,
}


def fit_problem(system: System, backend: str) -> str | None:
    """Why `backend` cannot run `system`'s scripts, and what to use instead; None if it can."""
    serves = SERVES.get(backend)
    if serves is None or system.scheduler in serves:
        return None
    if backend == "slurm":
        return (
            f"--backend slurm does not fit system {system.name!r}: it runs jobs on this machine "
            "(scheduler: local), so its scripts ask SLURM for no nodes or tasks; submit with "
            "--system slurm-local (the local SLURM cluster of `hpcscale cluster up`) or another "
            "profile with scheduler: slurm, or drop --backend to run here"
        )
    launcher = system.mpi[system.mpi_default].launcher or system.launcher
    needs = [f"starts ranks with {launcher} inside a SLURM allocation"]
    modules = sorted({*system.modules, *(m for f in system.mpi.values() for m in f.modules)})
    if modules:
        needs.append(f"loads modules ({', '.join(modules)})")
    return (
        f"--backend {backend} does not fit system {system.name!r}: its scripts are for SLURM "
        f"(scheduler: {system.scheduler}): each {' and '.join(needs)}, which this machine "
        "does not have outside a job; run here with --system local, or drop --backend to "
        "submit with sbatch"
    )


def backend_for(system: System, requested: str | None = None) -> str:
    """The backend to submit with: the one asked for, else the one the profile's scheduler
    implies (SLURM only where sbatch is on PATH: say what to do instead). A backend that cannot
    run the system's scripts (hpcscale.backends.fit) is refused, saying what to use instead."""
    if requested is not None:
        if requested not in REGISTRY:
            raise UsageError(f"unknown backend {requested!r}; known: {', '.join(REGISTRY)}")
        if problem := fit_problem(system, requested):
            raise UsageError(problem)
        return requested
    name = system.scheduler
    if name == "slurm" and not shutil.which("sbatch"):
        raise UsageError(
            "the system profile queues with SLURM but `sbatch` is not on PATH; "
            "use --dry-run to see the scripts, --backend local to run here, "
            'or `eval "$(hpcscale cluster up)"` for a local SLURM cluster'
        )
    return name
