"""One resolved cell of a campaign matrix. Everything downstream (render, submit, collect,
analyze) reads this and nothing else of the campaign."""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field

Scaling = Literal["weak", "strong", "none"]
Device = Literal["cpu", "gpu"]
Strategy = Literal["horovod", "mirrored"]
CrossDeviceOps = Literal["nccl", "reduce_to_one", "hierarchical_copy"]
MpiFlavour = Literal["openmpi", "mvapich2-gdr", "nccl", "gloo"]

RUN_SCHEMA_VERSION = 1


class Run(BaseModel):
    """A fully resolved run. `run_id` is a hash of every other field except `campaign`-level
    bookkeeping, so the same cell always gets the same id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    campaign: str
    system: str
    workload: str = Field(description="program in jobs/, e.g. 'gan' or 'cnn'")
    model: str = Field(description="network, e.g. dcgan, sngan, wgan_gp, resnet50")
    scaling: Scaling
    device: Device
    nodes: int
    tasks_per_node: int
    threads_per_task: int
    gpus_per_node: int
    replicas_per_task: int = Field(default=1, description="devices one mirrored process drives")
    batch_per_rank: int = Field(description="per replica: per rank under Horovod")
    global_batch: int
    strategy: Strategy = "horovod"
    cross_device_ops: CrossDeviceOps | None = None
    mpi: MpiFlavour = "openmpi"
    launcher: str = "mpirun"
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None
    fp16_allreduce: bool = False
    hierarchical_allreduce: bool = False
    mixed_precision: bool = False
    epochs: int = 1
    timeline: bool = False
    mark_cycles: bool = False
    time_limit_min: int = 60
    repeat: int = 0
    args: dict[str, Any] = Field(default_factory=dict, description="extra workload arguments")
    swept: tuple[str, ...] = Field(default=(), description="axes this run varies over")

    @property
    def ranks(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def replicas(self) -> int:
        """Data-parallel workers: ranks under Horovod, devices under MirroredStrategy."""
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

    def as_record(self, run_id: str | None = None) -> dict[str, Any]:
        """Flat dict for tables and JSON: model fields plus derived ones (`run_id` if known)."""
        rec = dict(self.__dict__)  # every field is a JSON type already; model_dump is slow
        rec["args"] = dict(self.args)
        rec["run_id"] = run_id or self.run_id
        rec["ranks"] = self.ranks
        rec["replicas"] = self.replicas
        rec["swept"] = list(self.swept)
        return rec


_NOT_HASHED = frozenset({"swept", "run_id"})  # bookkeeping, and the cached hash itself


def run_id_of(run: Run) -> str:
    """Short stable hash of the resolved content (canonical JSON, sorted keys)."""
    # Every field is already a JSON type, so the instance dict encodes exactly as
    # model_dump(mode="json") would, at a fraction of the cost (this runs per run, per use).
    content = {k: v for k, v in run.__dict__.items() if k not in _NOT_HASHED}
    blob = msgspec.json.encode(content, order="sorted")
    return hashlib.sha256(blob).hexdigest()[:10]
