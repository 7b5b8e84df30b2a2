#!/usr/bin/env python3
"""Benchmark: what tracing costs the steps it traces (issue #32): the per-rank bootstrap's
window (rankwrap --torch-trace: torch.profiler on CPU with record_shapes, one ProfilerStep per
optimizer step, the trace written at the window's end) against the same steps untraced.

One program, run in fresh Pythons: a small CNN's forward, backward and `opt.step()` on one
thread, SKIP + STEPS + 3 steps, timing each step from one `opt.step()` return to the next (the
boundaries the profiler steps at). `traced`: the bootstrap first on PYTHONPATH with the window
SKIP,STEPS, so steps SKIP..SKIP+STEPS-1 are the traced ones (the one before is the profiler's
warm-up); `untraced`: no bootstrap at all. Both time the same steps. The two alternate
(bench/interleave.py), `--repeats` times each, and the best run of each is kept: the median
step of the window (`*_ms_per_step`) and the whole window, the trace's export in its last step
included (`*_window_ms`). The wrapper's cost outside the window is bench/trace_wrapper_bench.py's.
Prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from interleave import Interleaved

REPO = Path(__file__).resolve().parents[1]
BOOT = REPO / "hpcscale" / "rankwrap_boot"

LOOP = """
import json, statistics, sys, time
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
skip, steps, width = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(width * 8 * 8, 64), torch.nn.ReLU(),
    torch.nn.Linear(64, 10),
)
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
ends, cpu = [time.perf_counter()], [time.process_time()]
for _ in range(skip + steps + 3):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    opt.step()
    ends.append(time.perf_counter())
    cpu.append(time.process_time())
# step k runs from ends[k] to ends[k + 1]; the window: steps skip .. skip + steps - 1
window = [ends[k + 1] - ends[k] for k in range(skip, skip + steps)]
print(json.dumps({
    "median_ms": statistics.median(window) * 1e3,
    "window_ms": (ends[skip + steps] - ends[skip]) * 1e3,
    "window_cpu_ms": (cpu[skip + steps] - cpu[skip]) * 1e3,
    "traced": "_hpcscale_trace_boot" in sys.modules,
}))
"""


def run(kind: str, args: argparse.Namespace, trace_dir: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCSCALE_T")}
    env.pop("PYTHONPATH", None)
    if kind == "traced":
        env.update(
            PYTHONPATH=str(BOOT),
            HPCSCALE_TORCH_TRACE=str(trace_dir),
            HPCSCALE_TRACE_WINDOW=f"{args.skip},{args.steps}",
        )
    out = subprocess.run(
        [sys.executable, "-c", LOOP, str(args.skip), str(args.steps), str(args.width)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["traced"] is (kind == "traced"), res
    if kind == "traced":  # the window was written, whole: STEPS ProfilerSteps
        with open(trace_dir / "rank0.json") as f:
            names = [e.get("name", "") for e in json.load(f)["traceEvents"]]
        assert sum(n.startswith("ProfilerStep#") for n in names) == args.steps, names[:5]
        res["trace_mb"] = (trace_dir / "rank0.json").stat().st_size / 1e6
        (trace_dir / "rank0.json").unlink()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", type=int, default=5, help="collect.trace_window's default")
    ap.add_argument("--steps", type=int, default=20, help="collect.trace_window's default")
    ap.add_argument("--width", type=int, default=32, help="the CNN's channels")
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"traced": [], "untraced": []}
    with tempfile.TemporaryDirectory() as tmp:

        def measure(kind: str, _np: int) -> tuple[list[float], list[float]]:
            res = run(kind, args, Path(tmp))
            runs[kind].append(res)
            # steps/s (from the median step) and steps/cpu-s over the window
            return [1e3 / res["median_ms"]], [args.steps * 1e3 / res["window_cpu_ms"]]

        Interleaved([("untraced", 1), ("traced", 1)], args.repeats, measure)
    traced = min(r["median_ms"] for r in runs["traced"])  # the best run of each, unrounded
    untraced = min(r["median_ms"] for r in runs["untraced"])
    t_win = min(r["window_ms"] for r in runs["traced"])
    u_win = min(r["window_ms"] for r in runs["untraced"])
    print(json.dumps({
        "bench": "torch_trace_cost",
        "steps": args.steps,
        "skip": args.skip,
        "repeats": args.repeats,
        "traced_ms_per_step": round(traced, 3),
        "untraced_ms_per_step": round(untraced, 3),
        "ratio": round(traced / untraced, 3),
        "traced_window_ms": round(t_win, 2),
        "untraced_window_ms": round(u_win, 2),
        "window_ratio": round(t_win / u_win, 3),
        "trace_mb": round(max(r["trace_mb"] for r in runs["traced"]), 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
