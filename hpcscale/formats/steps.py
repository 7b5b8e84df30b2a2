"""`steps.json`: rank 0's per-step timestamps, so the collector can line steps up with the
run's trace. Written by jobs/steps.py (`StepLog.to_file`), read by hpcscale/collect/split.py.

Fields (a JSON object, in this order):
    format          "hpcscale.steps"
    version         1
    rank, hostname  who recorded it (always rank 0)
    clock           "monotonic_ns": CLOCK_MONOTONIC, Python's time.monotonic_ns(); a trace's own
                    clock is lined up with it through `anchor` (docs/timeline.md)
    anchor          {"monotonic_ns": m, "unix_ns": u, "uncertainty_ns": e}: the two clocks read
                    at the same moment (u taken between two monotonic readings e ns apart; m is
                    their midpoint)
    unix_offset_ns  u - m; a monotonic reading t maps to Unix-epoch microseconds as
                    (t + unix_offset_ns) / 1000, the unit of the timeline's
                    `start_time_since_epoch_in_micros` + `ts`
    burn_in         {"start_ns": [...], "end_ns": [...]}: untimed warm-up steps (graph tracing)
    epoch, step, start_ns, end_ns
                    parallel lists, one entry per timed step (epoch and step from 0); a step is
                    the call of the compiled train step until its results are on the host

Readers ignore keys they do not know, so a later writer may add some without a version bump.
"""

from __future__ import annotations

import os
from typing import Optional, Union

import msgspec

from hpcscale.formats._messages import read_bytes
from hpcscale.model.errors import InputError

FORMAT = "hpcscale.steps"
VERSION = 1


class StepAnchor(msgspec.Struct):
    monotonic_ns: int
    unix_ns: int
    uncertainty_ns: int


class BurnIn(msgspec.Struct):
    start_ns: list[int] = []
    end_ns: list[int] = []


class StepsFile(msgspec.Struct, kw_only=True):
    """The whole file; field order is the file's key order. `format` and `version` have no
    default, so a file without them is refused rather than taken for ours."""

    format: str
    version: int
    rank: int = 0
    hostname: Optional[str] = None
    clock: str = "monotonic_ns"
    anchor: StepAnchor
    unix_offset_ns: int
    burn_in: BurnIn = msgspec.field(default_factory=BurnIn)
    epoch: list[int]
    step: list[int]
    start_ns: list[int]
    end_ns: list[int]


def encode_steps(steps: StepsFile) -> bytes:
    """Compact JSON: a long run has a few hundred thousand steps."""
    return msgspec.json.encode(steps)


def decode_steps(data: bytes, source: str = "steps.json") -> StepsFile:
    """Parse and check the format, version and list lengths; errors name `source`."""
    try:
        f = msgspec.json.decode(data, type=StepsFile)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise InputError(source, None, None, f"invalid steps file: {exc}") from exc
    if f.format != FORMAT or f.version != VERSION:
        raise InputError(
            source, None, "format", f"not an {FORMAT} v{VERSION} file ({f.format} v{f.version})"
        )
    n = len(f.start_ns)
    if not n or len(f.end_ns) != n or len(f.epoch) != n:
        raise InputError(source, None, "start_ns", "no steps, or lists of different lengths")
    if len(f.burn_in.start_ns) != len(f.burn_in.end_ns):
        raise InputError(source, None, "burn_in", "burn-in lists of different lengths")
    return f


def load_steps_file(path: Union[str, os.PathLike[str]]) -> StepsFile:
    """Read and check one `steps.json`; every failure names the file."""
    source, raw = read_bytes(path, "steps")
    return decode_steps(raw, source)
