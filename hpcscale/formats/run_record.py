"""`run.json`, the record `hpcscale render` leaves in every run directory: the resolved run
(`Run.as_record()`: the model's fields plus run_id, ranks, replicas) and `schema_version`.

Written by hpcscale/render/render.py (`encode_run_record`); read by the collector, the report's
provenance and `--where` selections (`load_run_record`). Files rendered before `schema_version`
was written count as version 1, and so do files that name `program` by its first name,
`workload`. Keys this version does not know are ignored (a change of meaning bumps the version);
a file without a run_id is not a run record at all. `campaign_version` names the version of
the campaign file that last rendered the run (`versions/<campaign_version>.yaml` in the campaign
directory) and `hpcscale_version` the hpcscale that did; neither is part of the run, so not of
its id (files written before they were recorded read as None).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any, Optional, Union

import msgspec

from hpcscale.formats._messages import key_of, read_bytes
from hpcscale.model.errors import InputError
from hpcscale.model.registry import DEFAULT_STRATEGY
from hpcscale.model.vocab import CrossDeviceOps, Device, Scaling, Strategy

SCHEMA_VERSION = 1
VERSIONS_DIR = "versions"  # in the campaign directory: every version of the campaign file


def campaign_version_of(text: Union[str, bytes]) -> str:
    """A campaign file version's id: the first 12 hex digits of its sha256."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:12]


class RunRecord(msgspec.Struct, kw_only=True):
    """One run.json. Fields and defaults follow hpcscale.model.run.Run (a test holds them
    together); `ranks` and `replicas` are derived there, stored here for readers."""

    schema_version: int = SCHEMA_VERSION
    campaign: str
    system: str
    program: str = "train"
    model: str
    scaling: Scaling
    device: Device
    nodes: int
    tasks_per_node: int
    threads_per_task: int
    gpus_per_node: int
    replicas_per_task: int = 1
    batch_per_rank: int
    global_batch: int
    strategy: Strategy = DEFAULT_STRATEGY
    cross_device_ops: Optional[CrossDeviceOps] = None
    mpi: str = "openmpi"
    launcher: str = "mpirun"
    fusion_threshold_mb: Optional[float] = None
    cycle_time_ms: Optional[float] = None
    fp16_allreduce: bool = False
    hierarchical_allreduce: bool = False
    bucket_cap_mb: Optional[float] = None  # torch_ddp's knobs (hpcscale.frameworks.torch_ddp)
    gradient_as_bucket_view: bool = False
    static_graph: bool = False
    fp16_compress: bool = False
    mixed_precision: bool = False
    epochs: int = 1
    timeline: bool = False
    mark_cycles: bool = False
    trace_window: Optional[dict[str, int]] = None  # collect.trace_window of a profiler trace
    time_limit_min: int = 60
    repeat: int = 0
    args: dict[str, Any] = {}
    swept: list[str] = []
    command: Optional[str] = None  # a command workload's words (shlex-joined), or None
    cwd: Optional[str] = None
    interpreter: Optional[str] = None  # 'as-written' (workload.interpreter), else the profile's
    run_id: str
    ranks: int
    replicas: int
    workload: Optional[str] = None  # `program` in files rendered before it was renamed
    campaign_version: Optional[str] = None  # None: rendered before versions were kept
    hpcscale_version: Optional[str] = None  # the hpcscale that rendered it; None: not recorded

    def __post_init__(self) -> None:
        if self.workload is not None:
            self.program = self.workload

    def names(self) -> dict[str, Any]:
        """Workload arguments and fields by name, fields winning a clash: what a `where:`
        expression over a run may use."""
        fields = msgspec.structs.asdict(self)
        del fields["args"], fields["workload"]
        return {**self.args, **fields}


def encode_run_record(record: Mapping[str, Any]) -> bytes:
    """run.json's bytes: `schema_version` first, then `record` (a `Run.as_record()`) in its own
    order, as indented JSON with a final newline. Not validated here: rendering writes
    thousands of these, and the record comes from a validated Run."""
    version = record.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ValueError(f"run record schema_version {version!r}: this writer writes version 1")
    data = msgspec.json.encode({"schema_version": SCHEMA_VERSION, **record})
    return msgspec.json.format(data, indent=2) + b"\n"


def decode_run_record(data: bytes, source: str = "run.json") -> RunRecord:
    """Parse and check one run record; every failure names `source` and what is wrong."""
    try:
        record = msgspec.json.decode(data, type=RunRecord)
    except msgspec.ValidationError as exc:
        raise _why_invalid(data, source, exc) from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise InputError(source, None, None, f"not valid JSON: {exc}") from exc
    if record.schema_version != SCHEMA_VERSION:
        raise _version_error(source, record.schema_version)
    return record


def load_run_record(path: Union[str, os.PathLike[str]]) -> RunRecord:
    """Read one run.json (see decode_run_record)."""
    source, raw = read_bytes(path, "run record")
    return decode_run_record(raw, source)


def _why_invalid(data: bytes, source: str, exc: msgspec.ValidationError) -> InputError:
    """A file that is JSON but not a valid record: foreign, from another version, or damaged."""
    loose = msgspec.json.decode(data)
    if not isinstance(loose, dict) or "run_id" not in loose:
        what = "an object" if isinstance(loose, dict) else f"a JSON {type(loose).__name__}"
        return InputError(source, None, None, f"not an hpcscale run record ({what} without run_id)")
    version = loose.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        return _version_error(source, version)
    return InputError(source, None, key_of(str(exc)), f"invalid run record: {exc}")


def _version_error(source: str, version: object) -> InputError:
    newer = " (written by a newer hpcscale?)" if isinstance(version, int) and version > 1 else ""
    return InputError(
        source,
        None,
        "schema_version",
        f"run record schema version {version!r} is not the supported {SCHEMA_VERSION}{newer}",
    )
