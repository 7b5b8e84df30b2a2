"""What a way of training is to hpcscale (a framework): the cells it can run and how they are
laid out, the knobs it reads, the command and environment of one rank, whether it needs a
launcher at all, and which trace format its runs write. Everything else (the matrix, scaling
arithmetic, scripts, schedulers, collection) is the same for every framework.

A framework is one module here and one line in hpcscale.model.registry.FRAMEWORKS."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from hpcscale.model.scaling import Layout
from hpcscale.model.vocab import ARGS_PREFIX
from hpcscale.model.workloads import Declaration, args_problem

if TYPE_CHECKING:
    from hpcscale.frameworks.checks import Check
    from hpcscale.model.campaign import LoadedCampaign
    from hpcscale.model.run import Run
    from hpcscale.model.system import System

Assignment = dict[str, Any]


@dataclass(frozen=True)
class Cell:
    """What the generic part of expansion settled for one cell before the framework lays it
    out: the campaign, the axis values, the device, nodes and GPUs per node."""

    lc: LoadedCampaign
    a: Assignment
    device: str
    nodes: int
    gpus: int


@dataclass(frozen=True)
class Placement:
    """The framework's answer: ranks and threads per node, devices one process drives, and
    the knob values the run gets (the assignment's, plus the framework's own defaults)."""

    layout: Layout
    replicas_per_task: int
    knobs: dict[str, Any]


@dataclass(frozen=True)
class Starter:
    """What `hpcscale init`'s starter campaign shows of the default framework: a matrix line
    sweeping one of its knobs with its comment, the comment on `collect: {timeline: true}`
    (what its trace gives), and how help names that knob ("a ... knob")."""

    knob: tuple[str, str]
    trace: str
    knob_words: str


class Framework:
    name: ClassVar[str]
    # the knobs it reads (names of hpcscale.model.run.KNOB_DEFAULTS)
    knobs: ClassVar[tuple[str, ...]] = ()
    # the trace format its runs write (hpcscale.model.registry.TRACE_READERS), if any
    trace: ClassVar[str | None] = None
    # its ranks meet at MASTER_ADDR:MASTER_PORT, which the job script sets (the scheduler's
    # `rendezvous` lines) and every launcher passes on
    rendezvous: ClassVar[bool] = False
    # what each of its knobs does, in a phrase (docs/reference.md's tables: the first framework
    # in the registry's order that says it)
    knob_help: ClassVar[Mapping[str, str]] = {}
    # what the report's knob studies of its knobs vary, in a sentence: the section's key
    # (`fusion`, `precision`, `hierarchical`) -> its text (the first framework in the
    # registry's order that says it)
    knob_studies: ClassVar[Mapping[str, str]] = {}
    # the environment variables that tune it, by prefix: the report's provenance lists those
    # a run recorded (beside the communication and threading libraries')
    env_prefixes: ClassVar[tuple[str, ...]] = ()
    # its libraries' versions in a bundled program's metrics.json provenance: (key, the name
    # the report's software table gives it)
    software: ClassVar[tuple[tuple[str, str], ...]] = ()
    # what the job's Python must import for it (`hpcscale doctor` checks them)
    python_modules: ClassVar[tuple[str, ...]] = ()
    # `hpcscale doctor`'s probes of the jobs' Python that only it knows: name -> the source of
    # a function of that name (standard library only, 3.6 syntax) returning a dict; its
    # doctor_check reads the answer
    doctor_probes: ClassVar[Mapping[str, str]] = {}
    # how `hpcscale doctor --help` names what its doctor_probes check
    doctor_words: ClassVar[str | None] = None
    # what `hpcscale init`'s starter shows of it when it is the default framework
    starter: ClassVar[Starter | None] = None
    # a user's program following it is named after it ("Your program (<this>)"): its campaign
    # said so (`workload.framework:`); None: named by its launcher (see Command.display_name)
    own_program_label: ClassVar[str | None] = None

    def place(self, cell: Cell) -> Placement:
        """Lay the cell out, or raise hpcscale.model.scaling.ScalingError naming the axis."""
        raise NotImplementedError

    def workload_problem(
        self, model: Any, args: dict[str, Any], decl: Declaration
    ) -> tuple[str, str] | None:
        """(axis, why) for a workload argument its bundled program would refuse, or None;
        the TensorFlow programs' are declared by the jobs/ manifest (`decl`)."""
        if broken := args_problem(model, args, decl):
            return ARGS_PREFIX + broken[0], broken[1]
        return None

    def argv(self, run: Run, system: System, run_dir: str) -> list[object]:
        """What one rank runs (quoted later by the renderer)."""
        raise NotImplementedError

    def env(self, run: Run, run_dir: str) -> dict[str, object]:
        """The variables every rank gets, beyond the profile's."""
        return {}

    def doctor_check(self, name: str, profile: System, python: str, found: dict[str, Any]) -> Check:
        """`hpcscale doctor`'s line for one of its doctor_probes: what `found` says, and the
        fix for this profile's Python when it fails."""
        raise NotImplementedError(name)

    def single_process(self, run: Run) -> bool:
        """One process drives every device: started without an MPI launcher."""
        return False

    def display_name(self, fields: Mapping[str, object]) -> str:
        """How tables, labels and legends name a run of it (Ahmad & Cai's names); `fields`:
        the run's or cell's strategy, cross_device_ops, mpi, command and launcher."""
        return self.name


def knobs_of(a: Assignment, names: tuple[str, ...]) -> dict[str, Any]:
    """The assignment's values of these knobs (those it sets)."""
    return {k: a[k] for k in names if k in a}
