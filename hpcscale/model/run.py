"""One resolved cell of a campaign matrix. Everything downstream (render, submit, collect,
analyze) reads this and nothing else of the campaign."""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Any

import msgspec
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hpcscale.model.registry import DEFAULT_STRATEGY
from hpcscale.model.vocab import KNOB_TERMS, CrossDeviceOps, Device, Scaling, Strategy

__all__ = ["CrossDeviceOps", "Device", "Run", "Scaling", "Strategy", "run_id_of"]

# A framework's knobs (hpcscale.frameworks) travel in `Run.knobs`, holding only those a run
# sets to something else than their default. The knobs every run carried as fields before they
# moved there are hashed always, under their flat names and with these defaults, so that no run
# id changes; knobs added since are hashed only when set. Records (run.json, the results
# table) keep them flat, one column each.
HASHED_KNOBS: dict[str, Any] = {
    "cross_device_ops": None,
    "fusion_threshold_mb": None,
    "cycle_time_ms": None,
    "fp16_allreduce": False,
    "hierarchical_allreduce": False,
}
# every knob a framework may set, with its default (a new framework's knobs: one entry here and
# a Term in hpcscale.model.vocab.KNOB_TERMS)
KNOB_DEFAULTS: dict[str, Any] = {
    **HASHED_KNOBS,
    "bucket_cap_mb": None,
    "gradient_as_bucket_view": False,
    "static_graph": False,
    "fp16_compress": False,
}
# a knob's value in its Term's type, as a typed field held it (an int fusion buffer is hashed
# as the float it always was)
_AS_TYPE: dict[str, Any] = {"float": float, "int": int, "bool": bool, "str": str}


def _typed(name: str, value: Any) -> Any:
    term = KNOB_TERMS.get(name)
    if value is None or term is None or isinstance(value, bool) != (term.type == "bool"):
        return value  # left for the knob's framework to refuse, not silently converted
    return _AS_TYPE.get(term.type, lambda v: v)(value)


class Run(BaseModel):
    """A fully resolved run. `run_id` is a hash of every other field except `campaign`-level
    bookkeeping, so the same cell always gets the same id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    campaign: str
    system: str
    program: str = Field(default="train", description="entry point: jobs/tf/<program>.py")
    model: str = Field(description="network, e.g. dcgan, sngan, wgan_gp, resnet50")
    scaling: Scaling
    device: Device
    nodes: int
    tasks_per_node: int
    threads_per_task: int
    gpus_per_node: int
    replicas_per_task: int = Field(default=1, description="devices one mirrored process drives")
    batch_per_rank: int = Field(
        description="per replica: per rank, or per device of a mirrored process"
    )
    global_batch: int
    strategy: Strategy = DEFAULT_STRATEGY
    mpi: str = Field(default="openmpi", description="a key of the system profile's `mpi:`")
    launcher: str = "mpirun"
    knobs: dict[str, Any] = Field(
        default_factory=dict,
        description="the framework's knobs this run sets (hpcscale.frameworks), defaults left out",
    )
    mixed_precision: bool = False
    epochs: int = 1
    timeline: bool = False
    mark_cycles: bool = False
    trace_window: dict[str, int] | None = Field(
        default=None,
        description="collect.trace_window {skip, steps} for a PyTorch profiler trace; None "
        "for a run that writes none",
    )
    time_limit_min: int = 60
    repeat: int = 0
    args: dict[str, Any] = Field(default_factory=dict, description="extra workload arguments")
    command: str | None = Field(
        default=None, description="the user's program (core.command), placeholders unfilled"
    )
    cwd: str | None = Field(default=None, description="where the command runs (absolute)")
    interpreter: str | None = Field(
        default=None, description="'as-written': a leading `python` is not the profile's"
    )
    swept: tuple[str, ...] = Field(default=(), description="axes this run varies over")

    @model_validator(mode="before")
    @classmethod
    def _fold_knobs(cls, data: Any) -> Any:
        """Knobs given flat (a record, an assignment) go into `knobs`, defaults dropped: one
        run has one form, whichever way it was written."""
        if not isinstance(data, dict) or not (
            KNOB_DEFAULTS.keys() & data.keys() or data.get("knobs")
        ):
            return data
        data = dict(data)
        flat = {k: data.pop(k) for k in KNOB_DEFAULTS.keys() & data.keys()}
        knobs = {**(data.get("knobs") or {}), **flat}
        typed = {k: _typed(k, v) for k, v in knobs.items()}
        data["knobs"] = {k: v for k, v in typed.items() if v != KNOB_DEFAULTS.get(k)}
        return data

    def knob(self, name: str) -> Any:
        """The knob's value for this run (its default when not set)."""
        return self.knobs.get(name, KNOB_DEFAULTS.get(name))

    def value(self, name: str) -> Any:
        """A field or a knob by its flat name (a record's column, a command's placeholder)."""
        return self.knob(name) if name in KNOB_DEFAULTS else getattr(self, name)

    @property
    def ranks(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def replicas(self) -> int:
        """Data-parallel workers: ranks, times the devices each (mirrored) process drives."""
        return self.ranks * self.replicas_per_task

    @cached_property
    def run_id(self) -> str:
        """Hashed once: a run is frozen, and every copy with changes drops it (model_copy)."""
        return run_id_of(self)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Run:
        copy = super().model_copy(update=update, deep=deep)
        if update:
            copy.__dict__.pop("run_id", None)
        return copy

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Run:
        """The run a run.json describes (derived and bookkeeping keys dropped); its id is
        re-derived, so an edited record cannot pass for the run it names."""
        fields = {k: v for k, v in record.items() if k in cls.model_fields or k in KNOB_DEFAULTS}
        if "program" not in fields and isinstance(record.get("workload"), str):
            fields["program"] = record["workload"]  # rendered before the rename
        fields["swept"] = tuple(fields.get("swept", ()))
        run = cls.model_validate(fields)
        if record.get("run_id") not in (None, run.run_id):
            raise ValueError(
                f"its fields hash to run id {run.run_id}, not {record['run_id']} (edited?)"
            )
        return run

    def as_record(self, run_id: str | None = None) -> dict[str, Any]:
        """Flat dict for tables and JSON: model fields plus derived ones (`run_id` if known)."""
        rec = dict(self.__dict__)  # every field is a JSON type already; model_dump is slow
        rec.update(HASHED_KNOBS)  # knobs added since appear only when set (records unchanged)
        rec.update(rec.pop("knobs"))  # flat: one column per knob
        rec["args"] = dict(self.args)
        rec["run_id"] = run_id or self.run_id
        rec["ranks"] = self.ranks
        rec["replicas"] = self.replicas
        rec["swept"] = list(self.swept)
        return rec


# bookkeeping, the cached hash itself, and where a command runs (a checkout moved elsewhere
# runs the same cells)
_NOT_HASHED = frozenset({"swept", "run_id", "cwd"})
# Fields added later, hashed only when set, so the runs rendered before them keep their ids.
_HASHED_IF_SET = ("command", "interpreter", "trace_window")
# Fields renamed since ids were first handed out, hashed under their first name so that a
# campaign rendered before the rename keeps its run ids (and its ledger rows and results).
_HASHED_AS = {"program": "workload"}


def run_id_of(run: Run) -> str:
    """Short stable hash of the resolved content (canonical JSON, sorted keys)."""
    # Every field is already a JSON type, so the instance dict encodes exactly as
    # model_dump(mode="json") would, at a fraction of the cost (this runs per run, per use).
    content = dict(run.__dict__)  # a C copy: a per-key comprehension costs 4x over 10,000s of runs
    knobs = content.pop("knobs")
    content.update(HASHED_KNOBS)
    content.update(knobs)
    for k in _NOT_HASHED:
        content.pop(k, None)
    for k in _HASHED_IF_SET:
        if content.get(k) is None:
            content.pop(k, None)
    for new, first in _HASHED_AS.items():
        content[first] = content.pop(new)
    blob = msgspec.json.encode(content, order="sorted")
    return hashlib.sha256(blob).hexdigest()[:10]
