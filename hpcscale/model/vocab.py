"""Every name a user meets in more than one place: campaign axes, framework knobs, run fields and
result columns, each defined once with its type, label and unit.

Campaign validation, the Run model, the analysis, the report's labels and the CLI's tables all
import from here, so a knob added or renamed here is known everywhere at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from hpcscale.model.registry import STRATEGIES

Scaling = Literal["weak", "strong", "none"]
Device = Literal["cpu", "gpu"]
Strategy = Literal[STRATEGIES]  # type: ignore[valid-type]  # the registry's frameworks
CrossDeviceOps = Literal["nccl", "reduce_to_one", "hierarchical_copy"]

SCALINGS: tuple[str, ...] = get_args(Scaling)
DEVICES: tuple[str, ...] = get_args(Device)
CROSS_DEVICE_OPS: tuple[str, ...] = get_args(CrossDeviceOps)


@dataclass(frozen=True)
class Term:
    """One named quantity. `type` is the JSON type of its values ("int", "float", "bool", "str",
    "list"); `label` is what a table or axis shows; `unit` is empty for counts and names."""

    name: str
    type: str
    label: str
    unit: str = ""
    help: str = ""

    @property
    def heading(self) -> str:
        """Label with its unit, for table headers and plot axes."""
        return f"{self.label} ({self.unit})" if self.unit else self.label


def _terms(*terms: Term) -> dict[str, Term]:
    return {t.name: t for t in terms}


# ---- Framework and distribution knobs: what a study varies at a fixed scale. What a framework's
# own knob does is said by the framework reading it (Framework.knob_help): the ground names none.
KNOB_TERMS = _terms(
    Term("strategy", "str", "Strategy", help=" | ".join(STRATEGIES)),
    Term("cross_device_ops", "str", "Cross-device ops"),
    Term("mpi", "str", "MPI flavour", help="MPI flavour, a key of the system profile's `mpi:`"),
    Term("fusion_threshold_mb", "float", "Fusion threshold", "MB"),
    Term("cycle_time_ms", "float", "Cycle time", "ms"),
    Term("fp16_allreduce", "bool", "fp16 all-reduce"),
    Term("hierarchical_allreduce", "bool", "Hierarchical all-reduce"),
    Term("mixed_precision", "bool", "Mixed precision", help="Keras mixed precision"),
    Term("bucket_cap_mb", "float", "Bucket size", "MB"),
    Term("gradient_as_bucket_view", "bool", "Gradient as bucket view"),
    Term("static_graph", "bool", "Static graph"),
    Term("fp16_compress", "bool", "fp16 compression"),
)
KNOBS: tuple[str, ...] = tuple(KNOB_TERMS)

# ---- The fields of a resolved run (run.json), in table order
RUN_TERMS = _terms(
    Term("run_id", "str", "Run"),
    Term("campaign", "str", "Campaign"),
    Term("system", "str", "System"),
    Term("program", "str", "Program", help="entry point in jobs/tf/ (train)"),
    Term("model", "str", "Model", help="network, e.g. dcgan, resnet50"),
    Term("scaling", "str", "Scaling", help="weak | strong | none"),
    Term("device", "str", "Device", help="cpu | gpu"),
    Term("nodes", "int", "Nodes", help="number of nodes"),
    Term("tasks_per_node", "int", "Ranks/node", help="ranks per node"),
    Term("threads_per_task", "int", "Threads/rank", help="threads per rank"),
    Term("gpus_per_node", "int", "GPUs/node", help="GPUs (= ranks) per node on GPU runs"),
    Term(
        "replicas_per_task",
        "int",
        "Replicas/rank",
        help="devices one MirroredStrategy process drives (logical CPUs on CPU)",
    ),
    Term("ranks", "int", "Ranks"),
    Term("replicas", "int", "Replicas"),
    Term("batch_per_rank", "int", "Batch/rank", "images", "per-rank batch, whatever the scaling"),
    Term("global_batch", "int", "Global batch", "images", "global batch, divided over the ranks"),
    *KNOB_TERMS.values(),
    Term("launcher", "str", "Launcher"),
    Term("epochs", "int", "Epochs", help="epochs per run"),
    Term("timeline", "bool", "Timeline"),
    Term("mark_cycles", "bool", "Cycle marks"),
    Term("time_limit_min", "int", "Time limit", "min", "wall-time limit per run"),
    Term("repeat", "int", "Repeat"),
    Term("command", "str", "Command", help="a command workload's program (placeholders unfilled)"),
    Term("cwd", "str", "Working directory", help="where a command workload runs"),
    Term("interpreter", "str", "Interpreter", help="'as-written': a leading python is the PATH's"),
)

# ---- Axes a campaign matrix may sweep: run fields plus shorthands resolved by expand.
# `args.<name>` sweeps any workload argument.
_AXIS_NAMES = (
    "nodes",
    "device",
    "gpus_per_node",
    "layout",
    "tasks_per_node",
    "threads_per_task",
    "replicas_per_task",
    "batch",
    "batch_per_rank",
    "global_batch",
    *KNOBS,
    "model",
    "epochs",
    "time_limit_min",
)
_SHORTHANDS = _terms(
    Term("layout", "str", "Layout", help="CPU ranks per node x threads per rank, e.g. '2x14'"),
    Term("batch", "int", "Batch", "images", "per-rank batch (weak, none) or global (strong)"),
)
AXIS_TERMS: dict[str, Term] = {n: _SHORTHANDS.get(n) or RUN_TERMS[n] for n in _AXIS_NAMES}
AXES: tuple[str, ...] = tuple(AXIS_TERMS)
ARGS_PREFIX = "args."

# ---- Result columns of the tidy table (one row per run)
# Run fields the table carries (from run.json); every workload argument comes beside them as a
# column `args.<name>` (`arg_column`).
TABLE_RUN_FIELDS: tuple[str, ...] = (
    "run_id",
    "campaign",
    "system",
    "program",
    "model",
    "scaling",
    "device",
    "nodes",
    "tasks_per_node",
    "threads_per_task",
    "gpus_per_node",
    "replicas_per_task",
    "ranks",
    "batch_per_rank",
    "global_batch",
    *KNOBS,
    "launcher",
    "epochs",
    "timeline",
    "mark_cycles",
    "time_limit_min",
    "repeat",
    "command",
    "cwd",
    "interpreter",
)
# ---- A cell: the runs that differ only in their repeat (and so their seed). Its identity is
# every resolved setting of the run: these fields (`ranks` and `gpus` follow from the layout,
# carried for the tables) plus every workload argument column present (`cell_keys`).
CELL_FIELDS: tuple[str, ...] = (
    *(f for f in TABLE_RUN_FIELDS if f not in ("run_id", "repeat")),
    "gpus",
)


def arg_column(name: str) -> str:
    """The table column of workload argument `name` (`args.lr`), as a matrix axis names it."""
    return ARGS_PREFIX + name


def is_arg_column(column: object) -> bool:
    return isinstance(column, str) and column.startswith(ARGS_PREFIX) and column != ARGS_PREFIX


def arg_columns(columns: Iterable[object]) -> tuple[str, ...]:
    """The workload-argument columns among `columns`, sorted by name."""
    return tuple(sorted({c for c in columns if is_arg_column(c)}))  # type: ignore[misc]


def cell_keys(columns: Iterable[object]) -> tuple[str, ...]:
    """The columns that tell cells apart in a frame with these columns: CELL_FIELDS and every
    `args.<name>` column (a run without that argument has None there)."""
    return (*CELL_FIELDS, *arg_columns(columns))


def args_as_columns(args: Mapping[str, object]) -> dict[str, object]:
    """A run's workload arguments as table cells: `{"args.lr": 0.002, ...}`. A value that is
    not a scalar (possible only for a jobs directory without a manifest) becomes its JSON text,
    so every cell is hashable and the row still tells the runs apart."""
    import json

    scalar = (str, int, float, bool, type(None))
    return {
        arg_column(k): v if isinstance(v, scalar) else json.dumps(v, sort_keys=True)
        for k, v in args.items()
    }


# Columns the table adds about a run beyond its fields.
EXTRA_TERMS = _terms(
    Term("model_family", "str", "Model family", help="gan | cnn (metrics.json `workload`)"),
)
METRIC_TERMS = _terms(
    Term("epoch_time_s", "float", "Epoch time", "s"),
    Term("images_per_s", "float", "Throughput", "images/s"),
    Term("fit_time_s", "float", "Fit time", "s"),
    Term("param_count", "int", "Parameters"),
    Term("dataset_size", "int", "Data set", "images"),
    Term(
        "input_images_per_s",
        "float",
        "Input pipeline throughput",
        "images/s",
        "the input pipeline alone, all ranks together; below images_per_s: input-bound",
    ),
)
LIST_TERMS = _terms(
    Term("epoch_times_s", "list", "Epoch times", "s"),
    Term("losses", "list", "Losses"),
    Term("train_accuracy", "list", "Training accuracy"),
    Term("val_accuracy", "list", "Validation accuracy"),
    Term("train_loss", "list", "Training loss", help="CNNs: per epoch, over the timed steps"),
    Term("val_loss", "list", "Validation loss", help="per epoch, over the held-out split"),
    Term(
        "params",
        "list",
        "Parameters per model",
        help="{model name: trainable + frozen parameters} (generator, discriminator, ...)",
    ),
    Term(
        "sample_grids",
        "list",
        "Sample grids",
        help="the run's sample grid files, oldest first (GANs: samples/epoch_NNN*.png)",
    ),
)
TIMELINE_TERMS = _terms(
    Term("comm_s", "float", "Communication per epoch", "s"),
    Term("wait_for_data_s", "float", "Wait for data per epoch", "s"),
    Term("wait_for_other_tensor_data_s", "float", "Wait for other tensors per epoch", "s"),
    Term(
        "waits_in_comm_s",
        "float",
        "Waits inside communication per epoch",
        "s",
        "the two waits unioned in time (they overlap), the part inside collectives: the overlap "
        "of the compute / communication split",
    ),
    Term("negotiate_s", "float", "Negotiation per epoch", "s"),
    Term("transport_s", "float", "Transport per epoch", "s"),
    Term("allreduce_bytes_per_step", "float", "All-reduce bytes per step", "bytes"),
    Term("bus_bandwidth_gbs", "float", "Bus bandwidth", "GB/s"),
    Term(
        "comm_span_share",
        "float",
        "Communication share of the timeline span",
        help="a run without steps.json (a program of your own): communication / the timeline's "
        "span, first to last recorded event, start-up included (0-1)",
    ),
    # A profiler trace's window (collect.trace_window): rank 0's traced steps, each its
    # ProfilerStep span, averaged; never scaled up to an epoch (the per-epoch columns stay
    # empty when the window holds fewer steps than the run timed)
    Term("traced_steps", "int", "Traced steps", help="steps inside the profiler trace's window"),
    Term(
        "compute_per_step_s", "float", "Compute per traced step", "s",
        "mean over the traced steps: time inside the step with compute running",
    ),
    Term(
        "comm_per_step_s", "float", "Communication per traced step", "s",
        "mean over the traced steps: the union of the step's collective spans",
    ),
    Term(
        "overlap_per_step_s", "float", "Overlapped communication per traced step", "s",
        "mean over the traced steps: communication while compute runs",
    ),
    Term(
        "exposed_comm_per_step_s", "float", "Exposed communication per traced step", "s",
        "mean over the traced steps: communication while no compute runs",
    ),
)  # fmt: skip
# The exact view sweeps rank 0's step spans against the timeline's communication: named by what
# it measures (on synchronous runs communication inside a step is not hidden behind compute).
EXACT_TERMS = _terms(
    Term(
        "exact_compute_s", "float", "Step time outside communication (exact)", "s",
        "per epoch: inside a training step, no collective running",
    ),
    Term(
        "exact_overlap_s", "float", "Communication inside a step (exact)", "s",
        "per epoch: a collective running while a training step is in flight",
    ),
    Term(
        "exact_exposed_comm_s", "float", "Communication between steps (exact)", "s",
        "per epoch: a collective running while no training step is",
    ),
)  # fmt: skip
# How much of a run's data can be trusted (hpcscale.analysis.quality reads them).
QUALITY_TERMS = _terms(
    Term("timeline_truncated", "bool", "Timeline truncated", help="cut, or ends before the run"),
    Term("timeline_coverage", "float", "Timeline coverage", help="fraction of the timed window"),
)
# When and where a run ran, and the machine's load (jobs/load.py): the contention checks'
# inputs (hpcscale.analysis.contention). `machines`/`hostnames`: comma-separated, rank order.
CONTENTION_TERMS = _terms(
    Term("started_unix_s", "float", "Started", "unix s"),
    Term("finished_unix_s", "float", "Finished", "unix s"),
    Term("machines", "str", "Machines", help="each rank's machine (kernel boot id, else host)"),
    Term("hostnames", "str", "Hosts"),
    Term("cpus", "int", "Machine CPUs", help="CPUs of rank 0's machine"),
    Term("load_1m_start", "float", "1-min load at start"),
    Term("load_1m_end", "float", "1-min load at end"),
    Term("others_cpus_start", "float", "Others' CPU use at start", "CPUs"),
    Term("others_cpus_end", "float", "Others' CPU use at end", "CPUs"),
    Term("other_jobs_start", "int", "Other SLURM jobs at start"),
    Term("other_jobs_end", "int", "Other SLURM jobs at end"),
)
CONTENTION_COLUMNS: tuple[str, ...] = tuple(CONTENTION_TERMS)
METRIC_COLUMNS: tuple[str, ...] = tuple(METRIC_TERMS)
QUALITY_COLUMNS: tuple[str, ...] = tuple(QUALITY_TERMS)
LIST_COLUMNS: tuple[str, ...] = tuple(LIST_TERMS)
TIMELINE_COLUMNS: tuple[str, ...] = tuple(TIMELINE_TERMS)
EXACT_COLUMNS: tuple[str, ...] = tuple(EXACT_TERMS)
# Columns the collector writes beside the terms above (collect.table.COLUMNS orders them all):
# what a trace adds, two times of the run, and the run's bookkeeping.
TRACE_EXTRA_COLUMNS: tuple[str, ...] = (
    "span_s",
    "timeline_events",
    "straggler_rank",
    "trace_source",
)
RUN_TIME_COLUMNS: tuple[str, ...] = ("queue_s", "memcpy_s")
RUN_EXTRA_COLUMNS: tuple[str, ...] = (
    "framework",  # the run's framework (model.registry.framework_of): `command` for a program
    "model_family",
    "steps_per_epoch",
    "step_time_p50_ms",
    "run_dir",
    "campaign_version",
    "stale",
    "state",  # the run's last known state (hpcscale.state.run_state): COMPLETED is measured
)

TERMS: dict[str, Term] = {
    **RUN_TERMS,
    **_SHORTHANDS,
    **EXTRA_TERMS,
    **METRIC_TERMS,
    **LIST_TERMS,
    **TIMELINE_TERMS,
    **EXACT_TERMS,
    **QUALITY_TERMS,
    **CONTENTION_TERMS,
}


def term(name: str) -> Term:
    """The term for a column or axis (`args.<name>` too: labelled as the campaign names it); an
    unknown name is a programming error."""
    if name not in TERMS and is_arg_column(name):
        return Term(name, "any", name, help="workload argument (campaign `args:`)")
    return TERMS[name]
