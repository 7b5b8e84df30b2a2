"""What observing costs: `probe.step()` around a 10 ms step against the same loop without it,
in one run, interleaved; and how fast the figure extractors stream a big log.

Per-step cost is measured two ways: the wall time of a loop of busy 10 ms steps with and without
the probe (noisy on a shared machine: the fastest of several rounds each), and the probe's own
cost on empty steps (many of them), which bounds it without the 10 ms of noise around it. The log
is a synthetic Horovod synthetic-benchmark output of `--log-mb` MB (default 1024) with the
figure lines spread through it, read by the extractors (RE2, in blocks) and, as the baseline in
the same run, by a per-line scan with Python's `re` (what the extractors did before RE2).
Ends with ONE JSON line.

    python bench/probe_bench.py [--steps 300] [--rounds 5] [--log-mb 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpcscale import probe
from hpcscale.collect.readers.extract import extract
from hpcscale.model.presets import HOROVOD_SYNTHETIC

STEP_S = 0.010


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def loop(steps: int, with_probe: bool) -> float:
    t0 = time.perf_counter()
    if with_probe:
        for _ in range(steps):
            with probe.step():
                _busy(STEP_S)
    else:
        for _ in range(steps):
            _busy(STEP_S)
    return time.perf_counter() - t0


def empty_cost_s(n: int) -> float:
    """Seconds per step the probe adds to an empty step (its own cost, noise-free-ish)."""
    best_with = best_without = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            with probe.step():
                pass
        best_with = min(best_with, time.perf_counter() - t0)
        probe._PROBE.steps_ns = []
        t0 = time.perf_counter()
        for _ in range(n):
            pass
        best_without = min(best_without, time.perf_counter() - t0)
    return max(best_with - best_without, 0.0) / n


def write_log(path: Path, megabytes: int) -> int:
    filler = "0: step  loss 0.693147 lr 0.0125 some framework chatter that matches nothing\n"
    block = filler * 2000 + "0: Iter #1: 105.3 img/sec per CPU\n"
    with open(path, "w") as fh:
        while fh.tell() < megabytes * 1_000_000:
            fh.write(block)
        fh.write("0: Img/sec per CPU: 104.9 +-1.2\n0: Total img/sec on 2 CPU(s): 209.8 +-2.4\n")
    return path.stat().st_size


def baseline_scan(path: Path) -> dict[str, float]:
    """The extractors before RE2: Python's `re` searched on every line (the last match kept)."""
    compiled = [(e.name, re.compile(e.pattern)) for e in HOROVOD_SYNTHETIC]
    last: dict[str, float] = {}
    with open(path, encoding="utf-8", errors="replace", buffering=1 << 20) as fh:
        for line in fh:
            for name, rx in compiled:
                m = rx.search(line)
                if m is not None:
                    last[name] = float(m.group("value"))
    return last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log-mb", type=int, default=1024)
    args = ap.parse_args()
    probe._PROBE.enabled = False

    with_s, without_s = [], []
    for _ in range(args.rounds):  # interleaved: load changes hit both alike
        without_s.append(loop(args.steps, False))
        probe._PROBE.steps_ns = []
        with_s.append(loop(args.steps, True))
        probe._PROBE.steps_ns = []
    wall_overhead = (min(with_s) - min(without_s)) / min(without_s)
    own_s = empty_cost_s(200_000)

    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        log = Path(tmp) / "output.log"
        size = write_log(log, args.log_mb)
        extract({"output": log}, HOROVOD_SYNTHETIC)  # warm the page cache for both
        t0 = time.perf_counter()
        got = extract({"output": log}, HOROVOD_SYNTHETIC)
        scan_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        base = baseline_scan(log)
        base_s = time.perf_counter() - t0
    assert got.values["images_per_s"] == 209.8 == base["images_per_s"], (got, base)

    print(
        json.dumps(
            {
                "bench": "probe",
                "steps": args.steps,
                "step_ms": STEP_S * 1e3,
                "ours_s": round(min(with_s), 4),
                "baseline_s": round(min(without_s), 4),
                "ratio": round(min(with_s) / min(without_s), 5),
                "wall_overhead_pct": round(100 * wall_overhead, 4),
                "probe_cost_us_per_step": round(own_s * 1e6, 3),
                "probe_cost_pct_of_10ms_step": round(100 * own_s / STEP_S, 5),
                "log_mb": round(size / 1e6, 1),
                "extract_s": round(scan_s, 2),
                "extract_mb_per_s": round(size / 1e6 / scan_s, 1),
                "extract_baseline_s": round(base_s, 2),
                "extract_baseline_mb_per_s": round(size / 1e6 / base_s, 1),
                "extract_speedup": round(base_s / scan_s, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
