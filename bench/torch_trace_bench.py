#!/usr/bin/env python3
"""Benchmark: the PyTorch profiler trace reader (hpcscale.collect.traces.torch) on a big
pretty-printed Kineto trace, against `json.load` of the same file.

The trace is generated: steps of a gloo DDP training thread (a ProfilerStep, forward ops,
backward ops with their c10d enqueues, the optimizer) and two gloo worker threads whose
`gloo:all_reduce` spans overlap, laid out as torch 2.13 writes them (one key per line, an
indented object per event), repeated with shifted time stamps until --mb is reached (default
200 MB; --gb for 1 GB). It lives in a temporary directory deleted afterwards.

Each measurement runs in a fresh subprocess that reports its CPU and wall time (after its
imports; hpcscale's import, a fixed cost, is reported apart) and its peak RSS (VmHWM): `ours`
summarises RUN_DIR/traces/rank0.json as the collector would; `json_load` is
`json.load` of the file and nothing else (what any whole-file reader, HTA's included, pays
first). Targets from issue #32: ours under 300 MB RSS on 1 GB and faster than json.load.
`--ranks N` writes N such traces (rank r of N, the same steps) so the cross-rank match is
measured too (json.load is of one, so the speedup counts it N times); `--repo DIR` measures
another checkout's hpcscale (a before/after comparison on one machine).
Ends by printing ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_NS = 1_700_000_000_000_000_000

EVENT = """  {{
    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 100, "tid": {tid},
    "ts": {ts:.3f}, "dur": {dur:.3f},
    "args": {{
      "External id": {ext},
      "Record function id": 0, "Ev Idx": {ext}
    }}
  }}"""


def _step(i: int, t: float, ops: int) -> tuple[list[str], float]:
    """One training step's events from time t (µs); the time it ends."""
    ev = []

    def add(name: str, ts: float, dur: float, tid: int = 100, cat: str = "cpu_op") -> None:
        ev.append(EVENT.format(cat=cat, name=name, tid=tid, ts=ts, dur=dur, ext=len(ev) + i))

    step_len = ops * 6.0 + 2000
    add(f"ProfilerStep#{i}", t, step_len, cat="user_annotation")
    add("DistributedDataParallel.forward", t + 10, ops * 2.0, cat="user_annotation")
    for k in range(ops):
        add("aten::linear" if k % 2 else "aten::relu", t + 11 + 2 * k, 1.5)
    b = t + 20 + ops * 2.0
    for k in range(ops):
        add("autograd::engine::evaluate_function: AddmmBackward0", b + 3 * k, 2.5)
        if k % (ops // 4 or 1) == 0:
            add("c10d::allreduce_", b + 3 * k + 2.5, 0.4)
            add(
                "gloo:all_reduce",
                b + 3 * k + 3,
                900.0,
                tid=201 + (k // 4) % 2,
                cat="user_annotation",
            )
    add("Optimizer.step#SGD.step", t + step_len - 400, 300, cat="user_annotation")
    return ev, t + step_len + 50


def build(path: Path, target_bytes: int, ops: int = 200, rank: int = 0, world: int = 1) -> int:
    """Write the trace (rank `rank` of `world`: the same steps on every rank); its size."""
    head = json.dumps(
        {"schemaVersion": 1, "deviceProperties": [],
         "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world,
                             "pg_count": 1},
         "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS},
        indent=2,
    )[:-2]  # fmt: skip
    with path.open("w") as f:
        f.write(head + ',\n  "traceEvents": [\n')
        size, t, i, first = 0, 1_000_000.0, 1, True
        while size < target_bytes:
            ev, t = _step(i, t, ops)
            text = ",\n".join(ev)
            f.write(("" if first else ",\n") + text)
            size += len(text) + 2
            first, i = False, i + 1
        f.write(f'\n  ],\n  "traceName": "rank{rank}.json"\n}}\n')
    return path.stat().st_size


MEASURE = """
import json, resource, sys, time
from pathlib import Path
what, path = sys.argv[1], Path(sys.argv[2])
i0 = time.process_time()
if what == "ours":  # the import is a fixed cost, not the file's: reported apart
    from hpcscale.collect.traces.torch import summarise
imported = time.process_time() - i0
c0, w0 = time.process_time(), time.perf_counter()
if what == "ours":
    s = summarise(path.parent, window_unix_us=None)
    out = {"comm_us": s.category_us["comm"], "compute_us": s.compute_us, "steps": len(s.steps),
           "events": s.events}
else:
    with open(path) as f:
        doc = json.load(f)
    out = {"events": len(doc["traceEvents"])}
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
out.update(import_cpu_s=imported, cpu_s=cpu, wall_s=wall, peak_rss_mb=hwm / 1024)
print(json.dumps(out))
"""


def measure(what: str, path: Path, repo: Path = REPO) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, what, str(path)],
        capture_output=True, text=True, check=True, cwd=repo,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="trace size in MB (default 200)")
    ap.add_argument("--gb", action="store_true", help="a 1 GB trace (json.load needs ~10 GB)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each, best CPU time kept")
    ap.add_argument("--skip-json-load", action="store_true", help="only ours (low memory)")
    ap.add_argument(
        "--ranks",
        type=int,
        default=1,
        help="ranks, each a trace of --mb (2 and up: the cross-rank match runs too)",
    )
    ap.add_argument(
        "--repo",
        type=Path,
        default=REPO,
        help="the checkout whose hpcscale is measured (a before/after comparison)",
    )
    a = ap.parse_args()
    target = (1 << 30) if a.gb else a.mb << 20
    tmp = Path(tempfile.mkdtemp(prefix="torch-trace-bench-"))
    try:
        path = tmp / "traces" / "rank0.json"
        path.parent.mkdir()
        size = build(path, target, world=a.ranks)
        for r in range(1, a.ranks):
            build(path.with_name(f"rank{r}.json"), target, rank=r, world=a.ranks)
        ours = min(
            (measure("ours", path, a.repo) for _ in range(a.repeat)), key=lambda r: r["cpu_s"]
        )
        base = None
        if not a.skip_json_load:
            base = min((measure("json", path) for _ in range(a.repeat)), key=lambda r: r["cpu_s"])
            assert base["events"] * a.ranks == ours["events"], (base, ours)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mb = size / (1 << 20)
    result = {
        "bench": "torch_trace",
        "trace_mb": round(mb, 1),
        "ranks": a.ranks,
        "repo": str(a.repo),
        "events": ours["events"],
        "ours_cpu_s": round(ours["cpu_s"], 3),
        "ours_import_cpu_s": round(ours["import_cpu_s"], 3),
        "ours_wall_s": round(ours["wall_s"], 3),
        "ours_mb_per_s": round(mb / ours["wall_s"], 1),
        "ours_peak_rss_mb": round(ours["peak_rss_mb"], 1),
        "json_load_cpu_s": None if base is None else round(base["cpu_s"], 3),
        "json_load_wall_s": None if base is None else round(base["wall_s"], 3),
        "json_load_peak_rss_mb": None if base is None else round(base["peak_rss_mb"], 1),
        "speedup_cpu": None if base is None else round(a.ranks * base["cpu_s"] / ours["cpu_s"], 2),
        "rss_target_met": ours["peak_rss_mb"] < 300,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
