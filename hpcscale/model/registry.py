"""Every plug-in by name, and where it lives ("module:Class"). Adding a launcher or a scheduler
is one module (or package) and one line here; the ground may then name it (a profile's
`launcher:` and `scheduler:` are checked against these names) without importing it, and
launchers/ and backends/ build their registries from these tables."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

LAUNCHERS: dict[str, str] = {
    "srun": "hpcscale.launchers.srun:Srun",
    "mpirun": "hpcscale.launchers.mpirun:Mpirun",
    "mpirun_rsh": "hpcscale.launchers.mpirun_rsh:MpirunRsh",
    "mpiexec": "hpcscale.launchers.mpiexec:Mpiexec",
    "horovodrun": "hpcscale.launchers.horovodrun:Horovodrun",
    "torchrun": "hpcscale.launchers.torchrun:Torchrun",
}


@dataclass(frozen=True)
class FrameworkLine:
    """A way of training: its class ("module:Class"), the `strategy:` value selecting it, and
    the `workload.framework:` value by which a command (the user's own program) borrows its
    launch contract and trace ("" where a command cannot)."""

    where: str
    strategy: str
    command_name: str = ""


FRAMEWORKS: dict[str, FrameworkLine] = {
    "horovod_tf": FrameworkLine("hpcscale.frameworks.horovod_tf:HorovodTF", "horovod", "horovod"),
    "tf_distribute": FrameworkLine("hpcscale.frameworks.tf_distribute:TFDistribute", "mirrored"),
    "torch_ddp": FrameworkLine("hpcscale.frameworks.torch_ddp:TorchDDP", "torch_ddp", "torch"),
}
# The default: a run (and a command) naming no strategy is this framework's. Hashed into run
# ids as a run's `strategy`, so changing it changes every existing run's id.
DEFAULT_FRAMEWORK = "horovod_tf"

# the `strategy:` values, in the registry's order (validation errors list them so)
STRATEGIES: tuple[str, ...] = tuple(line.strategy for line in FRAMEWORKS.values())
DEFAULT_STRATEGY: str = FRAMEWORKS[DEFAULT_FRAMEWORK].strategy
# workload.framework value -> the strategy of a command's cells
COMMAND_FRAMEWORKS: dict[str, str] = {
    line.command_name: line.strategy for line in FRAMEWORKS.values() if line.command_name
}
DEFAULT_COMMAND_FRAMEWORK: str = FRAMEWORKS[DEFAULT_FRAMEWORK].command_name
COMMAND = "command"  # the framework of a user's own program (hpcscale.frameworks.command)


def framework_of(strategy: object, command: bool = False) -> str:
    """The `framework` a run's row names: `command` for a user's own program (whatever it
    borrows), else the framework its strategy selects ("" for an unknown strategy)."""
    if command:
        return COMMAND
    return next((name for name, line in FRAMEWORKS.items() if line.strategy == strategy), "")


@dataclass(frozen=True)
class TraceLine:
    """A trace format: its TraceReader ("module:Class", a package under
    hpcscale/collect/traces/), what the report calls the figures it gave (the `trace_source`
    column's value, the "From" columns: the reader's `label`), and the same in a sentence.
    Here, not in the reader, so that analysis and report word a source without importing
    collect. `compiled`: the module of its compiled engine, if it has one (the doctor checks
    that it was built)."""

    where: str
    label: str
    phrase: str
    compiled: str = ""


TRACE_READERS: dict[str, TraceLine] = {
    "horovod": TraceLine(
        "hpcscale.collect.traces.horovod.reader:HorovodTimeline",
        "Horovod timeline",
        "the Horovod timeline",
        compiled="hpcscale.collect.traces.horovod._scan",
    ),
    "torch": TraceLine(
        "hpcscale.collect.traces.torch.reader:TorchProfilerTrace",
        "PyTorch profiler",
        "the PyTorch profiler traces",
    ),
}


@dataclass(frozen=True)
class SchedulerLine:
    """What a scheduler brings: the backend that queues and tracks its jobs ("module:Class"),
    the module writing its part of a job script (header, hosts; see render.SchedulerScript),
    and the name its jobs' own output takes in a run directory (a glob whose `*` is the job
    id), which collect, status and a ledger rebuilt from run directories look for."""

    backend: str
    script: str
    output: str


SCHEDULERS: dict[str, SchedulerLine] = {
    "slurm": SchedulerLine(
        "hpcscale.backends.slurm.backend:SlurmBackend",
        "hpcscale.backends.slurm.script",
        "slurm-*.out",
    ),
    "local": SchedulerLine(
        "hpcscale.backends.local:LocalBackend", "hpcscale.backends.local_script", "local.out"
    ),
}


def load(where: str) -> Any:
    """The object a registry line names."""
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)
