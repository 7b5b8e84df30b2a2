"""System profiles: what differs between clusters (and between a cluster and this laptop).

A profile is a YAML file users copy and edit. Scheduler (how to queue) and launcher (how to start
ranks) are independent choices, as in ReFrame. As on real sites, the partition depends on the
run (its device and node count) and so do modules and environment (no CUDA for CPU runs).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from hpcscale.model.errors import InputError
from hpcscale.model.names import ENV_NAME, NAME, SBATCH_SAFE
from hpcscale.model.registry import LAUNCHERS, SCHEDULERS
from hpcscale.model.resources import systems_dir, templates_dir
from hpcscale.model.template_files import template_problem
from hpcscale.model.validation import did_you_mean, validate
from hpcscale.model.vocab import Device
from hpcscale.model.yamlsrc import Source, load_yaml

if TYPE_CHECKING:
    from hpcscale.model.run import Run

SHIPPED_DIR = systems_dir()


def _setup_line(line: str) -> str:
    """Setup lines are the user's own shell, written as given; only a NUL (which bash cannot
    read) is refused, and an empty line, which says nothing."""
    if "\0" in line or not line.strip():
        raise ValueError(f"setup line {line!r} is empty or holds a NUL character")
    return line


# one line of `setup:` (profile or campaign), checked where it stands (setup[i])
SetupLine = Annotated[str, AfterValidator(_setup_line)]
# the shipped templates (hpcscale.model.resources: installed or checkout)
TEMPLATES_DIR = templates_dir()


def known_launcher(name: str | None) -> str | None:
    if name is not None and name not in LAUNCHERS:
        raise ValueError(
            f"unknown launcher {name!r}{did_you_mean(name, LAUNCHERS)}; "
            f"known: {', '.join(LAUNCHERS)}"
        )
    return name


Env = dict[str, str | int | float]


class DeviceSettings(BaseModel):
    """Modules and environment for runs on one device only (`gpu: {modules: [cuda]}`): a CPU
    run must not load CUDA or set MV2_USE_CUDA, and some nodes do not even have the library."""

    model_config = ConfigDict(extra="forbid")
    modules: list[str] = Field(default_factory=list)
    env: Env = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: Env) -> Env:
        return _check_env(env)


class PartitionRule(BaseModel):
    """One entry of `partitions:`: the partition for runs of `device` (any if unset) on
    `min_nodes`..`max_nodes` nodes. Rules are tried in order; the first that admits a run wins."""

    model_config = ConfigDict(extra="forbid")
    name: str
    device: Device | None = None
    min_nodes: int = Field(default=1, gt=0)
    max_nodes: int | None = Field(default=None, gt=0)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return sbatch_safe(v)

    @model_validator(mode="after")
    def _range(self) -> PartitionRule:
        if self.max_nodes is not None and self.max_nodes < self.min_nodes:
            raise ValueError(
                f"min_nodes {self.min_nodes} is above max_nodes {self.max_nodes}: "
                "the rule admits no run"
            )
        return self

    def admits(self, device: str, nodes: int) -> bool:
        return (
            (self.device is None or self.device == device)
            and nodes >= self.min_nodes
            and (self.max_nodes is None or nodes <= self.max_nodes)
        )

    def describe(self) -> str:
        lo, hi = self.min_nodes, self.max_nodes
        span = f"{lo}+" if hi is None else str(lo) if lo == hi else f"{lo}-{hi}"
        return f"{self.name} ({self.device or 'any device'}, {span} nodes)"


class Flavour(BaseModel):
    """One MPI flavour on a system: what to load and export to use it (`cpu:` / `gpu:` add
    what only runs on that device need, e.g. MVAPICH2-GDR's CUDA settings)."""

    model_config = ConfigDict(extra="forbid")
    modules: list[str] = Field(default_factory=list)
    env: dict[str, str | int | float] = Field(default_factory=dict)
    cpu: DeviceSettings = Field(default_factory=DeviceSettings)
    gpu: DeviceSettings = Field(default_factory=DeviceSettings)
    launcher: str | None = Field(default=None, description="overrides the system launcher")
    launcher_args: list[str] | None = Field(
        default=None, description="overrides the system's launcher_args (they suit its launcher)"
    )

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str | int | float]) -> dict[str, str | int | float]:
        return _check_env(env)

    @field_validator("launcher")
    @classmethod
    def _launcher(cls, v: str | None) -> str | None:
        return known_launcher(v)


SBATCH_OPTION = re.compile(r"--[a-z][a-z-]*(=[A-Za-z0-9_.:,@%+=/-]+)?\Z")


def sbatch_options_safe(opts: list[str]) -> list[str]:
    """Extra #SBATCH lines: sbatch reads them, not a shell, so each is a plain --option[=value]
    whose value needs no quoting (a profile's and a campaign's alike)."""
    for opt in opts:
        if not SBATCH_OPTION.fullmatch(opt):
            raise ValueError(f"{opt!r} is not a plain --option[=value] for #SBATCH")
    return opts


class System(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    scheduler: str = Field(
        default="slurm", description="how jobs are queued: " + " or ".join(SCHEDULERS)
    )
    launcher: str = "srun"
    template: str = Field(default="base.sbatch.j2", description="job template (Jinja)")
    templates: str | None = Field(
        default=None,
        description="a directory searched for `template` before the shipped templates/ "
        "(relative to the profile file)",
    )
    cores_per_node: int = Field(gt=0)
    gpus_per_node: int = Field(default=0, ge=0)
    max_nodes: int = Field(default=1024, gt=0)
    partition: str | None = Field(
        default=None, description="the partition of runs no `partitions` rule admits"
    )
    partitions: list[PartitionRule] = Field(
        default_factory=list, description="per device and node count, first match wins"
    )
    account: str | None = None
    qos: str | None = None
    constraint: str | None = Field(default=None, description="#SBATCH --constraint (features)")
    reservation: str | None = Field(default=None, description="#SBATCH --reservation")
    exclusive: bool = Field(
        default=False, description="#SBATCH --exclusive: no other job shares a run's nodes"
    )
    gpu_request: Literal["gpus_per_node", "gres"] = Field(
        default="gpus_per_node",
        description="how GPUs are asked for: --gpus-per-node=N, or --gres=gpu:N where the site "
        "has no select/cons_tres",
    )
    gres_type: str | None = Field(
        default=None, description="GPU type: --gres=gpu:TYPE:N (or --gpus-per-node=TYPE:N)"
    )
    setup: list[SetupLine] = Field(
        default_factory=list,
        description="shell lines run before the launch, written as given (not quoted, "
        "not a template)",
    )
    python: str = Field(default="python3", description="'auto' = the interpreter running hpcscale")
    jobs_dir: str | None = Field(
        default=None, description="where jobs/ lives on the cluster (its root: tf/, torch/ inside)"
    )
    modules: list[str] = Field(default_factory=list)
    env: dict[str, str | int | float] = Field(default_factory=dict)
    cpu: DeviceSettings = Field(default_factory=DeviceSettings, description="CPU runs only")
    gpu: DeviceSettings = Field(default_factory=DeviceSettings, description="GPU runs only")
    mpi_default: str = "openmpi"
    mpi: dict[str, Flavour] = Field(default_factory=lambda: {"openmpi": Flavour()})
    srun_mpi: str = Field(default="pmix", description="value of srun --mpi=")
    cpu_bind: Literal["none", "cores", "threads", "sockets"] = "none"
    launcher_args: list[str] = Field(default_factory=list)
    sbatch_options: list[str] = Field(default_factory=list, description="extra #SBATCH lines")
    time_limit_min: int = Field(default=60, gt=0)
    max_parallel: int | None = Field(
        default=None,
        gt=0,
        description="SLURM array throttle (%N) unless the campaign or `submit --max-parallel` "
        "sets one: at most N runs at once (1 where runs share one machine)",
    )
    runs_here: bool | None = Field(
        default=None,
        description="the jobs run on this machine, so `validate` and `submit` can check that "
        "the data and weights paths they read exist (default: yes for scheduler: local)",
    )
    site_examples: list[str] = Field(default_factory=list)  # see hpcscale.model.site_examples
    _source: Source | None = PrivateAttr(default=None)  # the profile file, for located errors

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:  # `init` writes the profile as <name>.yaml
        if not NAME.fullmatch(v):
            raise ValueError("name must be 1-64 letters, digits, '_', '.', '-' (it names a file)")
        return v

    @field_validator("partition", "account", "qos", "constraint", "reservation")
    @classmethod
    def _sbatch_safe(cls, v: str | None) -> str | None:
        return None if v is None else sbatch_safe(v)

    @field_validator("gres_type")
    @classmethod
    def _gres_type(cls, v: str | None) -> str | None:
        if v is not None and not GRES_TYPE.fullmatch(v):
            raise ValueError(f"{v!r} is not a GPU type name (letters, digits, _ . -)")
        return v

    @field_validator("sbatch_options")
    @classmethod
    def _options_safe(cls, opts: list[str]) -> list[str]:
        return sbatch_options_safe(opts)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str | int | float]) -> dict[str, str | int | float]:
        return _check_env(env)

    @field_validator("launcher")
    @classmethod
    def _launcher(cls, v: str) -> str:
        known_launcher(v)
        return v

    @field_validator("scheduler")
    @classmethod
    def _scheduler(cls, v: str) -> str:
        if v not in SCHEDULERS:
            raise ValueError(
                f"unknown scheduler {v!r}{did_you_mean(v, SCHEDULERS)}; "
                f"known: {', '.join(SCHEDULERS)}"
            )
        return v

    def flavour(self, name: str) -> Flavour:
        return self.mpi[name]

    def partition_for(self, run: Run) -> str | None:
        """The partition `run` is queued in: the first `partitions` rule admitting its device
        and node count, else `partition` (None: the cluster's default). With rules and no
        fallback, a run no rule admits is an error located at the profile's `partitions`."""
        for rule in self.partitions:
            if rule.admits(run.device, run.nodes):
                return rule.name
        if self.partition is not None or not self.partitions:
            return self.partition
        rules = "; ".join(r.describe() for r in self.partitions)
        message = (
            f"no partition admits a {run.nodes}-node {run.device} run (campaign {run.campaign}); "
            f"rules: {rules}; add a rule or a fallback `partition:`"
        )
        if self._source is None:
            raise InputError(f"<system {self.name}>", None, "partitions", message)
        raise self._source.error(("partitions",), message)

    def modules_for(self, run: Run) -> list[str]:
        """Modules to load, in order: the system's, its device's, the flavour's, the flavour's
        device's (so CUDA loads before an MPI built on it)."""
        flavour = self.mpi[run.mpi]
        own, theirs = _on(self, run.device), _on(flavour, run.device)
        return [*self.modules, *own.modules, *flavour.modules, *theirs.modules]

    def env_for(self, run: Run) -> dict[str, str | int | float]:
        """Environment of `run`, merged in the order of modules_for (later keys win)."""
        flavour = self.mpi[run.mpi]
        own, theirs = _on(self, run.device), _on(flavour, run.device)
        return {**self.env, **own.env, **flavour.env, **theirs.env}

    def gpu_option(self, gpus_per_node: int) -> str | None:
        """The #SBATCH option asking for a run's GPUs, as the site accepts it (None: none)."""
        if not gpus_per_node:
            return None
        count = f"{self.gres_type}:{gpus_per_node}" if self.gres_type else str(gpus_per_node)
        if self.gpu_request == "gres":
            return f"--gres=gpu:{count}"
        return f"--gpus-per-node={count}"

    @property
    def jobs_run_here(self) -> bool:
        """Whether a job's paths are this machine's paths (`runs_here`, else a local
        scheduler): only then can a missing data path be told before anything runs."""
        return self.scheduler == "local" if self.runs_here is None else self.runs_here

    @property
    def allocates_nodes(self) -> bool:
        """Jobs run inside a scheduler allocation whose hosts the job script must read; the
        local scheduler runs everything on this machine."""
        return self.scheduler != "local"

    def template_dirs(self) -> list[Path]:
        """Where the job template is looked up: the profile's own directory first."""
        own = [Path(self.templates)] if self.templates else []
        return [*own, TEMPLATES_DIR]


def _on(holder: System | Flavour, device: str) -> DeviceSettings:
    settings: DeviceSettings = holder.gpu if device == "gpu" else holder.cpu
    return settings


def sbatch_safe(v: str) -> str:
    """`v` as it may stand on an #SBATCH line (sbatch parses those, not a shell)."""
    if not SBATCH_SAFE.fullmatch(v):
        raise ValueError(f"{v!r} must contain only letters, digits and _.:,@%+=/-")
    return v


GRES_TYPE = re.compile(r"[A-Za-z0-9_.-]+\Z")


def python_of(system: System) -> str:
    """The interpreter the job runs with ('auto': the one running hpcscale)."""
    return sys.executable if system.python == "auto" else system.python


def _check_env(env: dict[str, str | int | float]) -> dict[str, str | int | float]:
    for key in env:
        if not ENV_NAME.fullmatch(key):
            raise ValueError(f"{key!r} is not a valid environment variable name")
    return env


def search_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("HPCSCALE_SYSTEMS_PATH", "").split(os.pathsep) if p]
    return [*extra, SHIPPED_DIR]


def shipped_systems() -> list[str]:
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.yaml"))


def load_system(
    ref: str, relative_to: Path | None = None, where: tuple[str, int | None] | None = None
) -> System:
    """A profile by name (from $HPCSCALE_SYSTEMS_PATH, then the shipped ones) or by path."""
    path: Path | None = None
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        candidate = Path(ref)
        if not candidate.is_absolute() and relative_to is not None:
            candidate = relative_to / candidate
        path = candidate if candidate.exists() else None
    else:
        for d in search_dirs():
            if (d / f"{ref}.yaml").exists():
                path = d / f"{ref}.yaml"
                break
    if path is None:
        known = shipped_systems()
        file, line = where if where else ("<system>", None)
        raise InputError(
            file,
            line,
            "system",
            f"unknown system {ref!r}{did_you_mean(ref, known)}; "
            f"shipped: {', '.join(known)} (or give a path to a profile YAML)",
        )
    src = load_yaml(path)
    data = src.data if isinstance(src.data, dict) else {}
    data.setdefault("name", path.stem)
    if isinstance(data.get("templates"), str):  # relative to the profile, wherever it is used
        data["templates"] = str((path.parent / data["templates"]).absolute())
    system = validate(System, data, src)
    system._source = src
    if system.mpi_default not in system.mpi:
        raise src.error(
            ("mpi_default",), f"{system.mpi_default!r} is not one of mpi: {', '.join(system.mpi)}"
        )
    if system.templates and not Path(system.templates).is_dir():
        raise src.error(("templates",), f"templates directory {system.templates} does not exist")
    problem = template_problem([str(d) for d in system.template_dirs()], system.template)
    if problem:
        raise src.error(("template",), problem)
    return system
