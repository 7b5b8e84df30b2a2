"""What every launcher is: the argv that starts a run's ranks, and whether it reads its hosts
from a file. How the job was queued is not its business (ReFrame's launcher/scheduler split).

Launchers see the profile only through the values a LaunchRequest carries, so they never import
the system profile (which imports their registry to check launcher names)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from hpcscale.model.run import Run


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """Everything a launcher may use. `allocated`: the job runs inside a scheduler allocation
    whose hosts the job script writes to $HPCSCALE_HOSTFILE / $HPCSCALE_HOSTS (if the launcher
    needs them); otherwise every rank runs on this machine. `python`: the job's interpreter;
    `cpu_bind`, `srun_mpi`: the profile's values of those keys."""

    run: Run
    program: list[object]
    env_names: list[str]
    extra: list[object]
    allocated: bool
    python: str = "python3"
    cpu_bind: str = "none"
    srun_mpi: str = "pmix"


class Launcher(ABC):
    """One way of starting ranks. Subclasses set `name` and implement `argv`."""

    name: ClassVar[str]
    reads_hostfile: ClassVar[bool] = False  # takes hosts from a file, not from the scheduler
    # reads a hostfile even on this machine (no allocation): the script then lists localhost
    always_hostfile: ClassVar[bool] = False
    # starts ranks that meet at MASTER_ADDR:MASTER_PORT (torchrun): only for a framework with a
    # rendezvous (hpcscale.frameworks.base.Framework.rendezvous)
    rendezvous: ClassVar[bool] = False
    # the strategy (hpcscale.model.registry.FRAMEWORKS) whose programs alone it starts: a
    # user's program it launched is that framework's, not a program of no framework
    implies_strategy: ClassVar[str | None] = None

    def needs_hostfile(self, allocated: bool) -> bool:
        """The job script must write the hostfile before the launch."""
        return self.reads_hostfile and (allocated or self.always_hostfile)

    @abstractmethod
    def argv(self, req: LaunchRequest) -> list[object]:
        """The launch command; `req.program` goes last, as given."""
