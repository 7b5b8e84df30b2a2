"""The campaign file: what to run, where, and which axes to sweep."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpcscale.model import workloads
from hpcscale.model.command import (
    COMMAND_KEYS,
    CommandFields,
    arg_names,
    check_command,
    command_metrics,
    command_units,
)
from hpcscale.model.errors import UsageError
from hpcscale.model.metrics import DERIVED_METRICS
from hpcscale.model.names import NAME
from hpcscale.model.strict import check_loaded, profile_error
from hpcscale.model.system import (
    SetupLine,
    System,
    known_launcher,
    load_system,
    sbatch_options_safe,
    sbatch_safe,
)
from hpcscale.model.targets import parse_target
from hpcscale.model.units import unit_problem
from hpcscale.model.validation import did_you_mean, validate
from hpcscale.model.vocab import (
    ARGS_PREFIX,
    AXIS_TERMS,
    CROSS_DEVICE_OPS,
    DEVICES,
    EXACT_COLUMNS,
    METRIC_COLUMNS,
    STRATEGIES,
    TABLE_RUN_FIELDS,
    TIMELINE_COLUMNS,
    Scaling,
    is_arg_column,
)
from hpcscale.model.yamlsrc import KeyPath, Source, load_yaml

# Axes a matrix may sweep (defined in vocab); `args.<name>` sweeps any workload argument.
AXES: dict[str, str] = {name: t.help for name, t in AXIS_TERMS.items()}
RULES = ("zip", "exclude", "where")
# The longest wall-time a run may ask for: 365 days, beyond any site's MaxTime (SLURM takes
# `--time` in minutes; 0 would mean no limit, a negative value a nonsensical one).
MAX_TIME_LIMIT_MIN = 525_600
# Smallest (and largest) value of each numeric axis; `choices` of the named ones.
AXIS_RANGES: dict[str, tuple[float, float | None]] = {
    "nodes": (1, None),
    "gpus_per_node": (0, None),
    "tasks_per_node": (1, None),
    "threads_per_task": (1, None),
    "replicas_per_task": (1, None),
    "batch": (1, None),
    "batch_per_rank": (1, None),
    "global_batch": (1, None),
    "fusion_threshold_mb": (0, None),
    "cycle_time_ms": (0, None),
    "epochs": (1, None),
    "time_limit_min": (1, MAX_TIME_LIMIT_MIN),
}
_RANGE_NOTES = {"time_limit_min": "minutes: 1 to 525600, i.e. 365 days; SLURM reads 0 as no limit"}
AXIS_CHOICES: dict[str, tuple[str, ...]] = {
    "device": DEVICES,
    "strategy": STRATEGIES,
    "cross_device_ops": CROSS_DEVICE_OPS,
}


class Workload(CommandFields):
    """A bundled program (`model`, `program`) or the user's own `command` (core.command)."""

    model_config = ConfigDict(extra="forbid")
    program: str = Field(
        default="train", pattern=r"^[A-Za-z0-9_]+$", description="entry point: jobs/tf/<program>.py"
    )
    model: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_]+$")
    epochs: int = Field(default=1, gt=0)
    args: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("args")
    @classmethod
    def _arg_names(cls, args: dict[str, Any]) -> dict[str, Any]:
        for k in args:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", k):
                raise ValueError(f"workload argument name {k!r} must be a plain identifier")
        return args

    @model_validator(mode="after")
    def _kind(self) -> Workload:
        if self.command is None:
            if self.model is None:
                raise ValueError("workload needs `model:` (a bundled program) or `command:`")
            extra = [k for k in COMMAND_KEYS if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"{', '.join(extra)}: only with a `command:` workload")
        elif "program" in self.model_fields_set:
            raise ValueError("`program:` names a bundled program; a command workload has none")
        return self


class TraceWindow(BaseModel):
    """The steps a PyTorch profiler trace records: a bounded window, so a long run does not
    write gigabytes of trace."""

    model_config = ConfigDict(extra="forbid")
    skip: int = Field(default=5, ge=0, description="steps left out first, burn-in included")
    steps: int = Field(default=20, ge=1, description="steps recorded after them")


class Collect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metrics: bool = True
    timeline: bool = False
    mark_cycles: bool = False
    trace_window: TraceWindow = Field(
        default_factory=TraceWindow,
        description="with timeline: true, the steps each rank's PyTorch profiler trace "
        "(strategy: torch_ddp) records: `skip` steps first (burn-in included; default 5), then "
        "`steps` (default 20), or fewer when the run ends first. Its figures are per step: "
        "per-epoch columns only where the window covers every timed step. A trace of another "
        "format (a timeline) covers the whole run",
    )
    rank_tolerance: float = Field(
        default=0.05,
        ge=0,
        description="a command metric whose ranks' values differ by more than this fraction "
        "of their mean is a Data quality note",
    )

    @model_validator(mode="after")
    def _cycles_need_timeline(self) -> Collect:
        if self.mark_cycles and not self.timeline:
            raise ValueError("mark_cycles marks cycles in the timeline: it needs timeline: true")
        if "trace_window" in self.model_fields_set and not self.timeline:
            raise ValueError("trace_window bounds the timeline's trace: it needs timeline: true")
        return self


class Reference(BaseModel):
    """An expected value for a derived metric, with tolerances (fractions of `value`)."""

    model_config = ConfigDict(extra="forbid")
    metric: str
    where: dict[str, str | int | float | bool] = Field(default_factory=dict)
    value: float
    lower: float | None = Field(
        default=None,
        description="how far below value may go, a fraction of value (0.2 = 20%); "
        "the sign is ignored, as in ReFrame's -0.2; null: no bound",
    )
    upper: float | None = Field(
        default=None, description="how far above value may go, a fraction of value; null: no bound"
    )
    unit: str = ""


class Target(BaseModel):
    """A training target (`METRIC<=VALUE` or `METRIC>=VALUE`). `placeholder: true` says the value
    stands in for one the study did not give: the report labels it "placeholder" wherever it is
    shown, so a time to it is never read as the study's."""

    model_config = ConfigDict(extra="forbid")
    target: str
    placeholder: bool = False

    @field_validator("target")
    @classmethod
    def _syntax(cls, v: str) -> str:

        parse_target(v)  # ValueError: located by `validate` at targets[i]
        return v


class Matrix(BaseModel):
    """Axes are free-form (checked by expand); the rules are typed here."""

    model_config = ConfigDict(extra="allow")
    zip: list[dict[str, list[Any]]] = Field(default_factory=list)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    where: str | None = None


class Campaign(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    workload: Workload
    system: str
    scaling: Scaling = "none"
    matrix: Matrix = Field(default_factory=Matrix)
    repeats: int = Field(default=1, ge=1, le=100)
    max_parallel: int | None = Field(
        default=None, ge=1, description="SLURM array throttle, over the profile's max_parallel"
    )
    collect: Collect = Field(default_factory=Collect)
    launcher: str | None = Field(
        default=None,
        description="how ranks start, over the profile's (and its MPI flavours') launcher: "
        "e.g. torchrun for strategy: torch_ddp",
    )
    references: list[Reference] = Field(default_factory=list)
    targets: list[Target] = Field(
        default_factory=list,
        description="training targets for the report's time to target: 'METRIC<=VALUE' (a loss) "
        "or 'METRIC>=VALUE' (an accuracy), e.g. 'g_loss<=1.2'; or {target: 'g_loss<=1.2', "
        "placeholder: true} for a stand-in value, which the report labels as one",
    )
    # site options over the system profile's (SITE_OPTIONS); setup lines add to the profile's
    exclusive: bool | None = Field(default=None, description="#SBATCH --exclusive, or not")
    qos: str | None = Field(default=None, description="#SBATCH --qos, over the profile's")
    constraint: str | None = Field(default=None, description="#SBATCH --constraint")
    reservation: str | None = Field(default=None, description="#SBATCH --reservation")
    sbatch_options: list[str] | None = Field(
        default=None, description="extra #SBATCH lines, instead of the profile's"
    )
    setup: list[SetupLine] = Field(
        default_factory=list,
        description="shell lines run before the launch, after the profile's, as written",
    )

    @field_validator("launcher")
    @classmethod
    def _launcher(cls, v: str | None) -> str | None:
        return known_launcher(v)

    @field_validator("qos", "constraint", "reservation")
    @classmethod
    def _sbatch_safe(cls, v: str | None) -> str | None:
        return None if v is None else sbatch_safe(v)

    @field_validator("sbatch_options")
    @classmethod
    def _options_safe(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else sbatch_options_safe(v)

    @field_validator("targets", mode="before")
    @classmethod
    def _target_texts(cls, v: Any) -> Any:
        """A plain 'g_loss<=1.2' is a target the study set (not a placeholder)."""
        return [{"target": t} if isinstance(t, str) else t for t in v] if isinstance(v, list) else v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.fullmatch(v):
            raise ValueError(
                "name must be 1-64 letters, digits, '_', '.', '-' (it names a directory)"
            )
        return v

    def axes(self) -> dict[str, Any]:
        return dict(self.matrix.model_extra or {})


class LoadedCampaign(BaseModel):
    """A validated campaign with where it came from (for located errors and the resolved copy)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    campaign: Campaign
    system: System
    path: Path
    source: Source


def load_campaign(path: str | Path, system: str | Path | None = None) -> LoadedCampaign:
    """Load and validate a campaign. `system` (a profile name or path) overrides the campaign's
    `system:`, so one campaign runs on a laptop, the local cluster and a real cluster."""
    path = Path(path)
    src = load_yaml(path)
    if not isinstance(src.data, dict):
        raise src.error((), "a campaign must be a YAML mapping (name:, workload:, system:, ...)")
    campaign = validate(Campaign, src.data, src)
    for axis in campaign.axes():
        if axis not in AXES and not axis.startswith(ARGS_PREFIX):
            raise src.error(
                ("matrix", axis),
                f"unknown axis {axis!r}{did_you_mean(axis, AXES)}; "
                f"axes: {', '.join(AXES)}, or args.<workload argument>",
            )
    if system is not None:  # from the command line: a path is relative to where the user is
        profile = load_system(str(system), relative_to=Path.cwd(), where=("--system", None))
        campaign = campaign.model_copy(update={"system": profile.name})
    else:
        profile = load_system(
            campaign.system, relative_to=path.parent, where=(str(path), src.line_of(("system",)))
        )
    check_loaded(campaign, profile, src)  # setup lines, site values, argument sizes
    profile = with_site_options(profile, campaign)
    # the TensorFlow programs' manifest; the PyTorch programs' are checked per cell by their
    # framework (hpcscale.frameworks.torch_ddp), so a torch-only campaign skips the manifest
    try:
        decl = workloads.declared(profile.jobs_dir) if runs_tf(campaign) else None
    except UsageError as exc:  # the profile's jobs_dir holds no usable manifest
        where = getattr(profile, "_source", None)
        raise profile_error(where, ("jobs_dir",), str(exc), profile) from None
    own = campaign.workload.command is not None  # the user's program: its arguments are its own
    if own:
        check_command(campaign, src)
    else:
        check_workload(campaign, src, decl)
    m = campaign.matrix
    places = [(("matrix", a), a, v) for a, v in campaign.axes().items()]
    places += [(("matrix", "zip", i, a), a, v) for i, g in enumerate(m.zip) for a, v in g.items()]
    places += [(("matrix", "exclude", i, a), a, []) for i, r in enumerate(m.exclude) for a in r]
    for key, axis, values in places:
        if not (own and is_arg_column(axis)):
            check_axis(axis, values, key, src, decl)
    check_references(campaign, src)
    return LoadedCampaign(campaign=campaign, system=profile, path=path, source=src)


# Campaign keys that replace the profile's value when set (beside `setup`, which appends).
SITE_OPTIONS = ("exclusive", "qos", "constraint", "reservation", "sbatch_options")


def with_site_options(profile: System, c: Campaign) -> System:
    """The profile as this campaign's runs see it: its own `exclusive`, `qos`, `constraint`,
    `reservation` and `sbatch_options` where it sets them, its `setup` lines after the
    profile's. Both sides were checked when loaded, so the copy needs no validation again."""
    update: dict[str, Any] = {
        key: getattr(c, key) for key in SITE_OPTIONS if getattr(c, key) is not None
    }
    if c.setup:
        update["setup"] = [*profile.setup, *c.setup]
    return profile.model_copy(update=update) if update else profile


def runs_tf(c: Campaign) -> bool:
    """Whether some cell may run a bundled TensorFlow program (any strategy but torch_ddp)."""
    values: list[Any] = []
    for group in (c.axes(), *c.matrix.zip):
        got = group.get("strategy", [])
        values += got if isinstance(got, list) else [got]
    return not values or any(v != "torch_ddp" for v in values)


def check_workload(c: Campaign, src: Source, decl: workloads.Declaration) -> None:
    """The program, model and argument names the job would reject, located."""
    if problem := workloads.program_problem(c.workload.program, decl):
        raise src.error(("workload", "program"), problem)
    if problem := workloads.model_problem(c.workload.model, decl):
        raise src.error(("workload", "model"), problem)
    for name in c.workload.args:
        if problem := workloads.arg_name_problem(name, decl):
            raise src.error(("workload", "args", name), problem)


def check_axis(
    axis: str, values: Any, key: KeyPath, src: Source, decl: workloads.Declaration
) -> None:
    """An axis's name and the type and range of each of its values (a list sweeps). Values an
    axis shares with others (a batch that must divide, a layout that must fit) are checked per
    cell by expand."""
    if axis.startswith(ARGS_PREFIX):
        if problem := workloads.arg_name_problem(axis.removeprefix(ARGS_PREFIX), decl):
            raise src.error(key, problem)
        return
    if axis not in AXIS_TERMS:
        raise src.error(key, f"unknown axis {axis!r}{did_you_mean(axis, AXES)}")
    for i, value in enumerate(values) if isinstance(values, list) else [(None, values)]:
        if problem := _value_problem(axis, value, decl):
            raise src.error(key if i is None else (*key, i), f"{axis}: {problem}")


def _value_problem(axis: str, value: Any, decl: workloads.Declaration) -> str | None:
    kind = AXIS_TERMS[axis].type
    if kind == "bool":
        return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
    if kind == "str":
        if axis == "model":
            return workloads.model_problem(value, decl)
        if not isinstance(value, str):
            return f"expected a name, got {value!r}"
        choices = AXIS_CHOICES.get(axis)
        if choices and value not in choices:
            return f"{value!r} is not one of {', '.join(choices)}{did_you_mean(value, choices)}"
        return None
    number = (int,) if kind == "int" else (int, float)
    if isinstance(value, bool) or not isinstance(value, number):
        what = "an integer" if kind == "int" else "a number"
        return f"expected {what}, got {value!r}"
    low, high = AXIS_RANGES.get(axis, (None, None))
    note = f" ({_RANGE_NOTES[axis]})" if axis in _RANGE_NOTES else ""
    if low is not None and value < low:
        return f"must be at least {low:g}, got {value}{note}"
    if high is not None and value > high:
        return f"must be at most {high:g}, got {value}{note}"
    return None


# Run fields a reference's `where` can select on: the report's table has one row per cell, so
# run_id and repeat are folded away; `gpus` (nodes x GPUs per node) is added.
REFERENCE_KEYS: tuple[str, ...] = (
    *(f for f in TABLE_RUN_FIELDS if f not in ("run_id", "repeat")),
    "gpus",
)


def reference_metrics(extra: Iterable[str] = ()) -> frozenset[str]:
    """The metrics a reference can check: what the report derives (speedup, efficiency, ...)
    and every measured metric (`extra`: a command's own), with the `_min`/`_max` of repeats."""

    measured = (*METRIC_COLUMNS, *TIMELINE_COLUMNS, *EXACT_COLUMNS, *extra)
    spreads = (f"{m}_{s}" for m in measured for s in ("min", "max"))
    return frozenset((*DERIVED_METRICS, *measured, *spreads))


def check_references(c: Campaign, src: Source) -> None:
    """A reference naming a metric or a `where` key the report does not have would fail every
    `report --check` after the runs: refuse it now."""
    if not c.references:
        return
    metrics = reference_metrics(command_metrics(c.workload))
    for i, ref in enumerate(c.references):
        if ref.metric not in metrics:
            raise src.error(
                ("references", i, "metric"),
                f"unknown metric {ref.metric!r}{did_you_mean(ref.metric, metrics)}; "
                f"metrics: {', '.join(sorted(m for m in metrics if not m.endswith(_SPREAD)))} "
                "(and <metric>_min, <metric>_max)",
            )
        if problem := unit_problem(ref, command_units(c.workload)):
            raise src.error(("references", i, "unit"), problem)
        # the workload arguments the campaign sets: each is a column `args.<name>` of the results
        known = (*REFERENCE_KEYS, *_set_args(c))
        for key in ref.where:
            if key not in known:
                raise src.error(
                    ("references", i, "where", key),
                    f"unknown where key {key!r}{did_you_mean(key, known)}; "
                    f"keys: {', '.join(known)}",
                )


def _set_args(c: Campaign) -> list[str]:
    """`args.<name>` of every workload argument the campaign sets (fixed or in its matrix)."""
    return sorted(ARGS_PREFIX + name for name in arg_names(c))


_SPREAD = ("_min", "_max")
