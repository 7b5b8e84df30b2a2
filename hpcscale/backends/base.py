"""The one interface every backend implements (submitit's small core as the model): submit
rendered runs, refresh their states into the ledger, cancel them, describe a submission
without making it. The API and the CLI talk to backends only through this."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from hpcscale.backends.repeats import DEFAULT_MAX_FAILURES, resumable
from hpcscale.model.errors import BackendError, HpcscaleError, UsageError
from hpcscale.state.states import RunState

if TYPE_CHECKING:
    from hpcscale.model.run import Run
    from hpcscale.model.system import System
    from hpcscale.render.render import Rendered
    from hpcscale.state.ledger import Ledger, RunRow


@dataclass(frozen=True)
class BackendOptions:
    """Options every backend understands. `force`: run again runs already submitted or done;
    `max_failures`: stop after that many runs failed the same way (0: never)."""

    force: bool = False
    max_failures: int = DEFAULT_MAX_FAILURES


@dataclass(frozen=True)
class StateChange:
    run_id: str
    old: RunState
    new: RunState


@dataclass
class Submission:
    """What a submit did. `rejected`: the scheduler refused them (with `errors`); `failed`: runs
    that ran and ended unsuccessfully (a local backend runs them to the end)."""

    backend: str
    submitted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    described: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the rest was not started (--max-failures), if it was not
    not_started: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.failed or self.rejected)


@dataclass
class Refreshed:
    changes: list[StateChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __iadd__(self, other: Refreshed) -> Refreshed:
        self.changes += other.changes
        self.warnings += other.warnings
        return self


class Reporter(Protocol):
    """Where a backend tells what it is doing: the CLI draws it with rich, the API is quiet."""

    def info(self, message: str) -> None: ...

    def warn(self, message: str) -> None: ...

    def run_started(self, r: Rendered, index: int, total: int) -> None: ...

    def run_progress(self, run_id: str, epoch: int, epochs: int) -> None: ...

    def run_ended(self, r: Rendered, state: RunState, seconds: float, tail: str | None) -> None: ...


class QuietReporter:
    """The API's default: says nothing (results come back as values)."""

    def info(self, message: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass

    def run_started(self, r: Rendered, index: int, total: int) -> None:
        pass

    def run_progress(self, run_id: str, epoch: int, epochs: int) -> None:
        pass

    def run_ended(self, r: Rendered, state: RunState, seconds: float, tail: str | None) -> None:
        pass


class Backend(ABC):
    """How rendered runs are queued and tracked. One instance works on one campaign directory.

    Adding a backend (PBS, Flux, a remote SLURM login node): one module with a subclass, one
    line in `hpcscale.backends.REGISTRY`."""

    name: ClassVar[str]
    options_type: ClassVar[type[BackendOptions]] = BackendOptions

    def __init__(self, campaign_dir: Path, reporter: Reporter | None = None) -> None:
        self.campaign_dir = campaign_dir
        self.reporter: Reporter = reporter or QuietReporter()

    def options(self, options: BackendOptions | None) -> BackendOptions:
        """The options to use; options meant for another backend are a usage error."""
        if options is None:
            return self.options_type()
        if type(options) is BackendOptions:  # the common ones: this backend's defaults for the rest
            return self.options_type(**options.__dict__)
        if not isinstance(options, self.options_type):
            raise UsageError(
                f"{type(options).__name__} options do not apply to the {self.name} backend"
            )
        return options

    @classmethod
    def preflight(cls, system: System, runs: Sequence[Run]) -> None:
        """What can be checked before anything is queued (a located error, exit 2): nothing
        by default; SLURM asks its controller for the runs' partitions and account."""
        return None

    def in_use(self, rows: Sequence[RunRow]) -> bool:
        """Whether this campaign has anything for this backend to refresh."""
        return any(row.backend == self.name for row in rows)

    @abstractmethod
    def submit(
        self, rendered: Sequence[Rendered], ledger: Ledger, options: BackendOptions
    ) -> Submission:
        """Submit (or run) what is not yet submitted or done; the ledger follows every step."""

    @abstractmethod
    def refresh(self, ledger: Ledger) -> Refreshed:
        """Bring this backend's runs in the ledger up to date."""

    @abstractmethod
    def cancel(self, ledger: Ledger, run_ids: Sequence[str]) -> list[str]:
        """Stop these runs; returns the job ids (or process groups) asked to stop."""

    @abstractmethod
    def describe(self, rendered: Sequence[Rendered], options: BackendOptions) -> list[str]:
        """The commands a submit would run, for a dry run."""

    def outputs(self, row: RunRow) -> list[Path]:
        """The files holding what a run of this backend printed, its own first (those that
        exist): what `status` reads a failure's reason from and `logs` prints."""
        return []


def wants_submit(row: RunRow | None, force: bool) -> bool:
    """A run is submitted again only with force (failures go through resubmit), or when
    `--max-failures` cancelled it before it started."""
    if row is not None and resumable(row):
        return True
    return force or row is None or not (row.state.active or row.state.terminal)


def raise_for(out: Submission) -> None:
    """Rejected or failed runs as an error (exit 1), naming them."""
    if out.rejected:
        raise BackendError("\n".join(out.errors) or f"{len(out.rejected)} run(s) rejected")
    if out.failed:
        raise HpcscaleError(
            f"{len(out.failed)} run(s) failed: {', '.join(out.failed)} (see `hpcscale status`)"
        )
