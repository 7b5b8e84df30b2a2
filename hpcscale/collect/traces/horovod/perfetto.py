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
import numpy as np

from hpcscale.collect.split import Steps, to_timeline_ns
from hpcscale.collect.traces.horovod import iter_raw_records, read_start_time
from hpcscale.formats.atomic import _temp_beside as temp_beside

STEPS_PID = 1_000_000_000  # far above any tensor pid Horovod hands out


@dataclass
class TraceInfo:
    out: Path
    records: int
    steps: int
    truncated: bool


def step_events(steps: Steps, start_time_us: int) -> list[dict[str, object]]:
    """Steps (tid 0), epochs (tid 1) and burn-in (tid 2) as complete events, µs floats."""

    def us(unix_ns: np.ndarray) -> list[float]:
        return (to_timeline_ns(unix_ns, start_time_us) / 1000.0).tolist()

    meta = [
        {"name": "process_name", "ph": "M", "pid": STEPS_PID,
         "args": {"name": "hpcscale steps (rank 0)"}},
        {"name": "process_sort_index", "ph": "M", "pid": STEPS_PID, "args": {"sort_index": -1}},
        {"name": "thread_name", "ph": "M", "pid": STEPS_PID, "tid": 0, "args": {"name": "steps"}},
        {"name": "thread_name", "ph": "M", "pid": STEPS_PID, "tid": 1, "args": {"name": "epochs"}},
        {"name": "thread_name", "ph": "M", "pid": STEPS_PID, "tid": 2,
         "args": {"name": "burn-in"}},
    ]  # fmt: skip
    out: list[dict[str, object]] = list(meta)
    start, end = us(steps.start_unix_ns), us(steps.end_unix_ns)
    epochs = steps.epoch.tolist()
    for i, (s, e, ep) in enumerate(zip(start, end, epochs, strict=True)):
        out.append(
            {"name": f"step {i}", "cat": "step", "ph": "X", "ts": s, "dur": e - s,
             "pid": STEPS_PID, "tid": 0, "args": {"epoch": ep, "index": i}}
        )  # fmt: skip
    for ep in sorted(set(epochs)):
        idx = [i for i, x in enumerate(epochs) if x == ep]
        s, e = min(start[i] for i in idx), max(end[i] for i in idx)
        out.append(
            {"name": f"epoch {ep}", "cat": "epoch", "ph": "X", "ts": s, "dur": e - s,
             "pid": STEPS_PID, "tid": 1, "args": {"steps": len(idx)}}
        )  # fmt: skip
    if len(steps.burn_in_unix_ns):
        b0, b1 = us(steps.burn_in_unix_ns[:, 0]), us(steps.burn_in_unix_ns[:, 1])
        for i, (s, e) in enumerate(zip(b0, b1, strict=True)):
            out.append(
                {"name": f"burn-in {i}", "cat": "burn_in", "ph": "X", "ts": s, "dur": e - s,
                 "pid": STEPS_PID, "tid": 2}
            )  # fmt: skip
    return out


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
