#!/usr/bin/env python3
"""Benchmark: what the per-rank trace bootstrap (rankwrap --torch-trace, issue #32) costs a
training step outside its window, on a step of about 10 ms.

Two fresh Pythons run the same loop: a tiny model's forward, backward and `opt.step()` plus a
10 ms busy spin (the step's compute). `without`: no bootstrap. `with`: the bootstrap first on
PYTHONPATH and a window that never opens (skip 10**9), so every step goes through our wrapper
and the profiler's step() in its waiting state: the cost every step outside the window pays.
Each reports the median time of `opt.step()` alone (where the wrapper runs) and of the whole
step; the overhead is the difference of the opt.step() medians, as a share of the whole step.
Target: at most 1 %. Prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOT = REPO / "hpcscale" / "rankwrap_boot"

LOOP = """
import json, statistics, sys, time
import torch
torch.set_num_threads(1)
steps, spin = int(sys.argv[1]), float(sys.argv[2])
m = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(16, 32)
opt_t, step_t = [], []
for _ in range(steps):
    t0 = time.perf_counter()
    loss = m(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    end = t0 + spin
    while time.perf_counter() < end:
        pass
    t1 = time.perf_counter()
    opt.step()
    t2 = time.perf_counter()
    opt_t.append(t2 - t1)
    step_t.append(t2 - t0)
hooked = "_hpcscale_trace_boot" in sys.modules
print(json.dumps({"opt_step_us": statistics.median(opt_t[10:]) * 1e6,
                  "step_ms": statistics.median(step_t[10:]) * 1e3, "hooked": hooked}))
"""


def run(steps: int, spin: float, boot: bool, trace_dir: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCSCALE_TRACE")}
    env.pop("HPCSCALE_TORCH_TRACE", None)
    if boot:
        env.update(
            PYTHONPATH=str(BOOT),
            HPCSCALE_TORCH_TRACE=trace_dir,
            HPCSCALE_TRACE_WINDOW=f"{10**9},1",
        )
    out = subprocess.run(
        [sys.executable, "-c", LOOP, str(steps), str(spin)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["hooked"] is boot, res
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each; best kept")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        without, with_ = [], []
        for _ in range(args.repeat):
            without.append(run(args.steps, args.step_ms / 1e3, False, tmp))
            with_.append(run(args.steps, args.step_ms / 1e3, True, tmp))
        assert not os.listdir(tmp), "a window that never opens wrote something"
    base = min(r["opt_step_us"] for r in without)
    hooked = min(r["opt_step_us"] for r in with_)
    step_ms = min(r["step_ms"] for r in without)
    overhead = hooked - base
    print(json.dumps({
        "bench": "trace_wrapper",
        "steps": args.steps,
        "step_ms": round(step_ms, 3),
        "opt_step_us_without": round(base, 2),
        "opt_step_us_with": round(hooked, 2),
        "overhead_us_per_step": round(overhead, 2),
        "overhead_pct_of_step": round(100 * overhead / (step_ms * 1e3), 4),
        "whole_step_ms_with": round(min(r["step_ms"] for r in with_), 3),
        "target_pct": 1.0,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
