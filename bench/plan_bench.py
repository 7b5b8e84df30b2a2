#!/usr/bin/env python3
"""Benchmark: `hpcscale plan` as a table against `hpcscale plan --json`, on 100,000 runs.

The campaign is campaigns/fusion_sweep.yaml widened and moved to the `cpu-cluster` profile:
nodes (10) x cycle_time_ms (100) x fusion_threshold_mb (100) = 100,000 runs. Both forms run as
the console script a user types, stdout into a file (so the table is the plain, piped form),
alternately, best of --repeats each; wall time and peak memory per process (wait4).

- ours:     `hpcscale plan CAMPAIGN > file` (the table; before this bench: 455 s and 1.5 GB)
- baseline: `hpcscale plan CAMPAIGN --json > file` (expansion and records, no table)

The table is checked: every run id of the JSON is in it, whole, one run per line. Target: the
table within 2x of the JSON (`ratio` = ours_s / baseline_s). Progress goes to stderr; the last
line on stdout is ONE JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 2.0
NODES = list(range(1, 11))
CYCLE_MS = [round(0.5 + 0.5 * i, 1) for i in range(100)]
FUSION_MB = [8 + 4 * i for i in range(100)]


def log(msg: str) -> None:
    print(f"[plan_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def campaign_text() -> str:
    return f"""# campaigns/fusion_sweep.yaml, widened to 100,000 runs on the cpu-cluster profile
name: plan_bench
description: Horovod cycle time x fusion buffer x nodes, DCGAN on CPU nodes
workload:
  model: dcgan
  epochs: 2
  args: {{image_size: 64, dataset_size: 202599}}
system: cpu-cluster
scaling: weak
matrix:
  nodes: {NODES}
  device: cpu
  batch: 128
  cycle_time_ms: {CYCLE_MS}
  fusion_threshold_mb: {FUSION_MB}
collect: {{timeline: true, mark_cycles: true}}
"""


def timed(argv: list[str], out: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one process, stdout into `out`."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    with out.open("wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return seconds, usage.ru_maxrss / 1024


def check(table: Path, records: Path) -> int:
    ids = [r["run_id"] for r in json.loads(records.read_bytes())]
    lines = table.read_text().splitlines()
    first = {ln.split(" ", 1)[0] for ln in lines}
    missing = [i for i in ids if i not in first]
    if missing:
        raise SystemExit(f"table lacks {len(missing)} run ids, e.g. {missing[:3]}")
    return len(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="runs of each form (best is kept)")
    args = ap.parse_args()
    exe = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"
    with tempfile.TemporaryDirectory(prefix="plan_bench.") as tmp:
        d = Path(tmp)
        yaml = d / "plan_bench.yaml"
        yaml.write_text(campaign_text())
        best: dict[str, tuple[float, float]] = {}
        for k in range(args.repeats):
            for form, extra in (("baseline", ["--json"]), ("ours", [])):
                s, rss = timed([exe, "plan", str(yaml), *extra], d / f"{form}.out")
                log(f"{form} #{k + 1}: {s:.2f} s, {rss:.0f} MB")
                if form not in best or s < best[form][0]:
                    best[form] = (s, max(rss, best.get(form, (0, 0))[1]))
        runs = check(d / "ours.out", d / "baseline.out")
    ours, base = best["ours"], best["baseline"]
    ratio = ours[0] / base[0]
    print(
        json.dumps(
            {
                "bench": "plan_table",
                "runs": runs,
                "ours_s": round(ours[0], 3),
                "baseline_s": round(base[0], 3),
                "ratio": round(ratio, 3),
                "ours_max_rss_mb": round(ours[1]),
                "baseline_max_rss_mb": round(base[1]),
                "target_ratio": TARGET_RATIO,
                "ok": ratio <= TARGET_RATIO,
            }
        )
    )


if __name__ == "__main__":
    main()
