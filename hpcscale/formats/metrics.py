"""The schema of `metrics.json`, the file every job writes in its run directory (rank 0).

One definition shared by the writer (jobs/tf/harness) and every reader (collector, analysis), so the
two cannot drift. No TensorFlow here: the core package must import without it.
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal, Optional, Union

import msgspec

from hpcscale.formats._messages import key_of, read_bytes
from hpcscale.model.errors import InputError
from hpcscale.model.vocab import Device, Strategy

SCHEMA_VERSION: int = 1

Workload = Literal["gan", "cnn"]
LrScaling = Literal["linear", "sqrt", "none"]


class _Struct(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=False):
    """Unknown fields are an error: a typo in a writer must not pass silently."""


class ParamCount(_Struct):
    total: int
    trainable: int


class StepTimes(_Struct):
    """Rank 0's timed steps (burn-in excluded), in milliseconds."""

    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float


class SyncCheck(_Struct):
    """Digest of every variable (weights and optimizer state) per rank after training."""

    identical: bool
    digests: list[str]


class Provenance(_Struct):
    python: str
    tensorflow: str
    keras: str
    horovod: Optional[str]
    mpi: Optional[str]
    hostnames: list[str]
    env: dict[str, str]
    git_revision: Optional[str]
    git_dirty: Optional[bool]
    argv: list[str]


class LoadSample(_Struct):
    """The machine's load at one moment (jobs/load.py). `others_cpus`: CPUs kept busy by other
    processes during a short window in which every rank of this run sleeps (/proc/stat);
    `other_jobs`: other running SLURM jobs on this node (None: not under SLURM, or squeue did
    not answer)."""

    unix_s: float
    load_1m: float
    load_5m: float
    load_15m: float
    cpus: int
    others_cpus: Optional[float]
    other_jobs: Optional[int]


class RunLoad(_Struct):
    """Load at the start (before the timed epochs) and the end (after them), on rank 0's
    machine; `machines`: each rank's machine identity (kernel boot id, else hostname)."""

    machines: list[str]
    start: LoadSample
    end: LoadSample


class Metrics(_Struct, kw_only=True):
    """Everything one run measured. Times in seconds unless the name says otherwise; lists
    indexed by epoch. `images_per_s` is global: global_batch * steps_per_epoch / epoch time."""

    schema_version: int
    workload: Workload
    model: str
    strategy: Strategy
    cross_device_ops: Optional[str]
    ranks: int
    replicas: int
    batch_per_rank: int
    global_batch: int
    epochs: int
    steps_per_epoch: int
    dataset_size: int
    data: str
    image_size: int
    num_classes: Optional[int]
    device: Device
    threads: Optional[int]
    fp16_allreduce: bool
    mixed_precision: Optional[str]
    timeline: bool
    lr: float
    lr_scaled: float
    warmup_epochs: float
    burn_in_steps: int
    burn_in_s: float
    epoch_time_s: list[float]
    # rank 0's process CPU time (all threads) per epoch; absent in files from before it existed
    epoch_cpu_s: Optional[list[float]] = None
    images_per_s: list[float]
    fit_time_s: float
    losses: dict[str, list[float]]
    # Files before per-epoch validation: the CNNs' *training* accuracy was stored here.
    accuracy: Optional[list[float]] = None
    # Per-epoch means over the epoch's timed steps (train_*) and over the whole held-out split,
    # averaged over ranks, measured outside the timed steps in `val_time_s` (val_*).
    train_loss: Optional[list[float]] = None
    train_accuracy: Optional[list[float]] = None
    val_loss: Optional[list[float]] = None
    val_accuracy: Optional[list[float]] = None
    val_time_s: Optional[list[float]] = None
    # The input pipeline alone, all ranks together: below images_per_s means input-bound.
    input_images_per_s: Optional[float] = None
    # eta = lr * scale(global_batch / lr_ref_batch); absent in files from before the rule.
    lr_scaling: Optional[LrScaling] = None
    lr_ref_batch: Optional[int] = None
    step_time: StepTimes
    params: dict[str, ParamCount]
    param_count: int
    sync_check: Optional[SyncCheck]
    started_unix_s: float
    finished_unix_s: float
    provenance: Provenance
    # absent in files from before runs recorded the machine's load
    load: Optional[RunLoad] = None


def json_schema() -> dict[str, Any]:
    """JSON Schema of `metrics.json`, for users' own tooling."""
    return msgspec.json.schema(Metrics)


def encode_metrics(metrics: Metrics) -> bytes:
    return msgspec.json.format(msgspec.json.encode(metrics), indent=2) + b"\n"


def metrics_from_dict(data: dict[str, Any]) -> Metrics:
    """Validate a plain dict (the writer's path): raises msgspec.ValidationError on a mismatch."""
    return msgspec.convert(data, Metrics)


def load_metrics(path: Union[str, os.PathLike[str]]) -> Metrics:
    """Read and validate one `metrics.json`; every failure names the file."""
    source, raw = read_bytes(path, "metrics")
    try:
        try:
            metrics = msgspec.json.decode(raw, type=Metrics)
        except msgspec.ValidationError:
            # a diverged run's NaN loss is written as null (JSON has no NaN): read it back as NaN
            metrics = msgspec.convert(_nan_for_null(msgspec.json.decode(raw)), Metrics)
    except msgspec.ValidationError as exc:
        key = key_of(str(exc))
        raise InputError(source, None, key, f"invalid metrics: {exc}") from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise InputError(source, None, None, f"not valid JSON: {exc}") from exc
    if metrics.schema_version != SCHEMA_VERSION:
        raise InputError(
            source,
            None,
            "schema_version",
            f"schema version {metrics.schema_version} is not the supported {SCHEMA_VERSION}",
        )
    return metrics


class _ProvenanceOnly(msgspec.Struct):
    """The one field `load_provenance` decodes (the rest is skipped, not built)."""

    provenance: Any = None


def load_provenance(path: Union[str, os.PathLike[str]]) -> Any:
    """metrics.json's `provenance` as written (unvalidated), or None when the file is missing,
    unreadable or no JSON object: the report's provenance section reads a thousand runs'
    files for this field alone, and decoding their per-epoch series was most of its time."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        return msgspec.json.decode(raw, type=_ProvenanceOnly).provenance
    except (OSError, msgspec.DecodeError, UnicodeDecodeError):  # ValidationError included
        return None


def _nan_for_null(data: Any) -> Any:
    """null -> NaN in the per-epoch lists, the loss lists and the step-time figures: the places
    where the writer's non-finite floats land. Anything else stays as it is (and may still fail
    validation, naming its key)."""
    if not isinstance(data, dict):
        return data

    def fix(values: Any) -> Any:
        if not isinstance(values, list):
            return values
        return [math.nan if v is None else v for v in values]

    out = {k: fix(v) for k, v in data.items()}
    if isinstance(out.get("losses"), dict):
        out["losses"] = {k: fix(v) for k, v in out["losses"].items()}
    if isinstance(out.get("step_time"), dict):
        out["step_time"] = {k: math.nan if v is None else v for k, v in out["step_time"].items()}
    return out
