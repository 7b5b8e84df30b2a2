"""A run of a system profile wrapped in its launcher: where the profile (core.system) and the
launcher registry meet, so that neither imports the other's side back."""

from __future__ import annotations

from hpcscale.frameworks import for_run
from hpcscale.launchers import LaunchRequest, get
from hpcscale.model.run import Run
from hpcscale.model.system import System, python_of


def needs_hostfile(run: Run, system: System) -> bool:
    """The job script writes $HPCSCALE_HOSTFILE (and $HPCSCALE_HOSTS) before the launch."""
    return get(run.launcher).needs_hostfile(system.allocates_nodes)


def launch_argv(
    run: Run, system: System, program: list[object], env_names: list[str]
) -> list[object]:
    """Wrap `program` in the run's launcher. `env_names` must reach every rank."""
    if for_run(run).single_process(run):
        return program  # one process drives all devices: no MPI launcher needed
    flavour = system.flavour(run.mpi)
    extra: list[object] = []  # the profile's launcher_args suit its own launcher only
    if flavour.launcher_args is not None and (flavour.launcher or system.launcher) == run.launcher:
        extra = list(flavour.launcher_args)
    elif flavour.launcher_args is None and system.launcher == run.launcher:
        extra = list(system.launcher_args)
    req = LaunchRequest(
        run,
        program,
        env_names,
        extra,
        system.allocates_nodes,
        python=python_of(system),
        cpu_bind=system.cpu_bind,
        srun_mpi=system.srun_mpi,
    )
    return get(run.launcher).argv(req)
