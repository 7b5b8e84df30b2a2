"""What every launcher is: the argv that starts a run's ranks, and whether it reads its hosts
from a file. How the job was queued is not its business (ReFrame's launcher/scheduler split)."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from hpcscale.core.run import Run
    from hpcscale.core.system import System


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """Everything a launcher may use. `allocated`: the job runs inside a scheduler allocation
    whose hosts the job script writes to $HPCSCALE_HOSTFILE / $HPCSCALE_HOSTS (if the launcher
    needs them); otherwise every rank runs on this machine."""

    run: Run
    system: System
    program: list[object]
    env_names: list[str]
    extra: list[object]
    allocated: bool


class Launcher(ABC):
    """One way of starting ranks. Subclasses set `name` and implement `argv`."""

    name: ClassVar[str]
    reads_hostfile: ClassVar[bool] = False  # takes hosts from a file, not from the scheduler

    def needs_hostfile(self, allocated: bool) -> bool:
        """The job script must write the hostfile before the launch."""
        return self.reads_hostfile and allocated

    @abstractmethod
    def argv(self, req: LaunchRequest) -> list[object]:
        """The launch command; `req.program` goes last, as given."""


def python_of(system: System) -> str:
    """The interpreter the job runs with ('auto': the one running hpcscale)."""
    return sys.executable if system.python == "auto" else system.python
