"""Every plug-in by name, and where it lives ("module:Class"). Adding a launcher, a scheduler,
a framework, a trace format or an extractor preset is one module (or package) and one line
here; the ground may then name it (a profile's `launcher:` and `scheduler:`, a campaign's
`strategy:` and `metrics:` are checked against these names) without importing it, and
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
class RankEnv:
    """The variables a launcher (or the process manager under it) sets in each process it
    starts: its rank, and the number of ranks (the first of `size` that is set). `marker`: a
    variable set only by this launcher, which a reader may require before trusting `rank`
    (torchrun's RANK is a common name)."""

    rank: str
    size: tuple[str, ...] = ()
    marker: str = ""


# Who set this process's rank, the innermost launcher first: under `srun` or `mpirun` ->
# torchrun every worker of a node shares the node's OMPI_*/PMI_*/SLURM_* rank, and only
# torchrun's RANK tells them apart. SLURM's task comes last: a batch script's own step sets
# SLURM_PROCID to 0, and ranks started by another launcher inside the job inherit it. Read in
# this order by hpcscale.probe (in the user's program) and hpcscale.rankwrap (which reads this
# file by its path: stdlib only, Python 3.9). A launcher that sets its own is one line here.
RANK_ENV: dict[str, RankEnv] = {
    "torchrun": RankEnv("RANK", ("WORLD_SIZE",), marker="TORCHELASTIC_RUN_ID"),
    "openmpi": RankEnv("OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",)),  # mpirun
    "pmi": RankEnv("PMI_RANK", ("PMI_SIZE",)),  # MPICH/Intel MPI Hydra, srun --mpi=pmi2
    "mvapich2": RankEnv("MV2_COMM_WORLD_RANK", ("MV2_COMM_WORLD_SIZE",)),  # mpirun_rsh
    "horovodrun": RankEnv("HOROVOD_RANK", ("HOROVOD_SIZE",)),  # horovodrun --gloo
    # srun --mpi=pmix (there equal to SLURM_PROCID), Open MPI 4+ (which sets OMPI_* too). Late:
    # Hydra starts its per-node proxies with srun inside a job, and a rank under a proxy would
    # inherit the proxy's PMIX_RANK (its node) beside its own PMI_RANK.
    "pmix": RankEnv("PMIX_RANK"),
    "slurm": RankEnv("SLURM_PROCID", ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")),  # srun
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
    that it was built). `made_by`: what writes it, as help says it ("" where the label says
    enough). `waits`: what the overlap split's W (communication waiting for data) is in it, in
    a sentence of the report's overlap section ("" where it has none). `of_runs`: the trace
    with the runs that write it, as the report says where a communication share would come
    from ("" where no bundled framework writes it)."""

    where: str
    label: str
    phrase: str
    compiled: str = ""
    made_by: str = ""
    waits: str = ""
    of_runs: str = ""


TRACE_READERS: dict[str, TraceLine] = {
    "horovod": TraceLine(
        "hpcscale.collect.traces.horovod.reader:HorovodTimeline",
        "Horovod timeline",
        "the Horovod timeline",
        compiled="hpcscale.collect.traces.horovod._scan",
        made_by="HOROVOD_TIMELINE output",
        waits=(
            "In a Horovod timeline W is wait for data and wait for other tensor data (they "
            "overlap: in a fused batch one tensor waits for the others while another still "
            "waits for its data, so their sum would count that time twice); CPU timelines "
            "record no waits, so there Only communication = C."
        ),
        of_runs="a Horovod timeline for Horovod runs",
    ),
    "torch": TraceLine(
        "hpcscale.collect.traces.torch.reader:TorchProfilerTrace",
        "PyTorch profiler",
        "the PyTorch profiler traces",
        waits=(
            "In a PyTorch profiler trace W is each rank's wait for the others (each collective "
            "matched across ranks; unknown, and left empty, where no reliable match exists)."
        ),
        of_runs="PyTorch profiler traces for DDP runs",
    ),
}


@dataclass(frozen=True)
class PresetLine:
    """A named extractor list, a command campaign's `metrics:` value: the figures a known
    program prints. `where`: its extractors ("module:attr", a tuple of Extractor in a module of
    the ground, hpcscale.model, which validation loads: never a module above it);
    `throughput`: the figure its scaling tables use unless the campaign says otherwise."""

    where: str
    throughput: str


PRESETS: dict[str, PresetLine] = {
    # Horovod's synthetic benchmark scripts (TensorFlow, Keras and PyTorch print the same lines)
    "horovod_synthetic": PresetLine("hpcscale.model.presets:SYNTHETIC_IMAGES", "images_per_s"),
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
