"""One Chrome-trace file with a run's step spans and its Horovod timeline on one time axis.

The timeline's records are copied byte for byte (streamed; a cut final record is dropped and the
array closed), on the timeline's own axis: µs since Horovod's init. Steps, epochs and burn-in
from `steps.json` are mapped onto it as `X` events of an extra process (see `split` for the
alignment and its error bound). Opens in Perfetto (ui.perfetto.dev) and chrome://tracing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import msgspec

from hpcscale.collect.split import Steps
from hpcscale.collect.traces.horovod import iter_raw_records, read_start_time
from hpcscale.collect.traces.step_spans import step_events
from hpcscale.formats.atomic import _temp_beside as temp_beside


@dataclass
class TraceInfo:
    out: Path
    records: int
    steps: int
    truncated: bool


def write_trace(timeline: Path, steps: Steps | None, out: Path) -> TraceInfo:
    """Stream the merged trace into `out` (atomically: a temp file renamed at the end, with
    the mode a plain open() gives, so others can read it as the umask allows).

    Raises ValueError when steps are given but the timeline has no start time to align them."""
    extra: list[dict[str, object]] = []
    if steps is not None:
        start = read_start_time(timeline)
        if start is None:
            raise ValueError(
                f"{timeline} has no start_time_since_epoch_in_micros (written before Horovod "
                "0.20.1?): the steps cannot be aligned with it"
            )
        extra = step_events(steps, start)
    fd, tmp = temp_beside(out, None)  # the mode open() would give, not mkstemp's 0600
    stats: dict[str, object] = {}
    records = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"[\n")
            first = True
            enc = msgspec.json.Encoder()
            for ev in extra:
                fh.write((b"" if first else b",\n") + enc.encode(ev))
                first = False
            for chunk in iter_raw_records(timeline, stats=stats):
                if not chunk:
                    continue
                body = b",".join(bytes(r) for r in chunk)
                fh.write((b"" if first else b",\n") + body)
                first = False
                records += len(chunk)
            fh.write(b"\n]\n")
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return TraceInfo(
        out=out,
        records=records,
        steps=0 if steps is None else len(steps.start_unix_ns),
        truncated=bool(stats.get("truncated")),
    )
