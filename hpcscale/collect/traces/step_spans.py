"""The run's steps, epochs and burn-in (steps.json) as Chrome-trace events of one extra
process, "hpcscale steps (rank 0)", which every format's merged trace (`hpcscale trace`) carries
on its own time axis (see hpcscale.collect.split for the alignment and its error bound)."""

from __future__ import annotations

import numpy as np

from hpcscale.collect.split import Steps, to_timeline_ns

STEPS_PID = 1_000_000_000  # far above any pid a trace's own events use (tensors, ranks)


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
