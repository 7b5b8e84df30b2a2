#!/usr/bin/env python3
"""Benchmark: hpcscale's streaming timeline parser on a ~1 GB Horovod timeline.

The big file repeats a real timeline (written by a real Horovod run of jobs/tf/train.py, or
--source) with shifted time stamps and pids, byte for byte in Horovod 0.28.1's layout, into a
temporary directory that is deleted afterwards. Each measurement runs in a fresh subprocess that
reports its own time and peak RSS (VmHWM):

- ours:      hpcscale.collect.traces.horovod.parse_timeline on the whole file (MB/s, peak RSS)
             and on the sample below, with the compiled engine
             (hpcscale.collect.traces.horovod._scan) as installed;
             on the sample also with engine="python" (`python_engine_*`: what a machine
             without a C compiler at install time gets);
- baseline:  json.load + a plain Python loop computing the same figures (per-pid B/E stacks,
             category unions by sorting, allreduce bytes, last-ready rank), on a sample (the
             first --sample-mb of the big file, closed with `]`): json.load of the whole GB
             would need ~10 GB of RAM on this shared machine; --sample-mb 0 uses the whole file;
- bare:      orjson.loads and msgspec.json.decode of the sample's bytes, nothing else: the
             practical limit for anything that turns every record into Python objects.

Ratios use CPU time, best of --repeat runs (the machine is shared; wall figures too).
Targets: ours >= 5x the baseline, within 2x of the faster bare decode, peak RSS < 300 MB on the
1 GB file.
Ends by printing ONE JSON line.
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
PY = sys.executable


# ---------------------------------------------------------------- building the big file


def _record(ev: dict) -> tuple[str, list[str]]:
    """One record in Horovod's byte layout, with %d placeholders for ts and pid, and which
    (kind of) number goes in each."""
    name = str(ev.get("name", "")).replace("%", "%%")
    ph = ev["ph"]
    if ph == "M":
        args = ev.get("args") or {}
        if "sort_index" in args:
            return (
                '{"name": "process_sort_index", "ph": "M", "pid": %d, "args": {"sort_index": %d}}',
                ["pid", "pid"],
            )
        tensor = str(args.get("name", "")).replace("%", "%%")
        body = '{"name": "process_name", "ph": "M", "pid": %d, "args": {"name": "' + tensor + '"}}'
        return body, ["pid"]
    if ph == "i":
        return '{"ph": "i", "name": "' + name + '", "ts": %d, "s": "g"}', ["ts"]
    head = '{"ph": "' + ph + '"' + ("" if ph == "E" else ', "name": "' + name + '"')
    text = head + ', "ts": %d, "pid": %d'
    if ph == "X":
        text += ', "dur": 0'
    args = ev.get("args")
    if args:
        inner = ", ".join(f'"{k}": "{v}"' for k, v in args.items()).replace("%", "%%")
        text += ', "args": {' + inner + "}"
    return text + "}", ["ts", "pid"]


def build(source: Path, out: Path, size_mb: float) -> dict:
    """Write ~size_mb of timeline: copy k of the source's records gets ts + k*span and
    pid + k*npids (new tensors), laid out as Horovod 0.28.1 writes."""
    import msgspec
    import numpy as np

    from hpcscale.collect.traces.horovod import iter_raw_records

    events = [msgspec.json.decode(r) for chunk in iter_raw_records(source) for r in chunk]
    header = [e for e in events if e["ph"] == "M" and e.get("pid") == 0]
    body = [e for e in events if not (e["ph"] == "M" and e.get("pid") == 0)]
    if not body:
        raise SystemExit(f"{source}: no events to repeat")
    pieces: list[str] = []
    kinds: list[str] = []
    values: list[int] = []
    for i, ev in enumerate(body):
        text, slots = _record(ev)
        sep = "" if i == len(body) - 1 else (",\n" if ev["ph"] == "M" else ",")
        pieces.append(text + sep)
        for slot in slots:
            kinds.append(slot)
            values.append(int(ev["pid"] if slot == "pid" else ev["ts"]))
    template = "".join(pieces).encode()
    base = np.asarray(values, dtype=np.int64)
    is_ts = np.asarray([k == "ts" for k in kinds])
    ts_vals = base[is_ts]
    span = int(ts_vals.max() - ts_vals.min()) + 1000
    npids = int(base[~is_ts].max())
    step = np.where(is_ts, span, npids)
    target = int(size_mb * 1e6)
    copies = 0
    with open(out, "wb") as fh:
        fh.write(b"[\n")
        for ev in header:
            text, _ = _record(ev)
            start = (ev.get("args") or {}).get("start_time_since_epoch_in_micros")
            if start is not None:
                text = (
                    '{"name": "process_name", "ph": "M", "pid": 0, '
                    f'"args": {{"start_time_since_epoch_in_micros":{start}}}}}'
                )
            else:
                text = text % ((0,) * text.count("%d"))
            fh.write(text.encode() + b",\n")
        written = fh.tell()
        while written < target:
            if copies:
                fh.write(b",")
            fh.write(template % tuple((base + copies * step).tolist()))
            copies += 1
            written = fh.tell()
        fh.write(b"]")
    return {"copies": copies, "records_per_copy": len(body), "bytes": out.stat().st_size}


def make_sample(big: Path, out: Path, size_mb: float) -> int:
    """The first size_mb of `big`, cut after a whole record and closed: valid JSON."""
    with open(big, "rb") as fh:
        data = fh.read(int(size_mb * 1e6))
    if len(data) < big.stat().st_size:
        data = data[: data.rfind(b"},") + 1] + b"]"
    out.write_bytes(data)
    return len(data)


# ---------------------------------------------------------------- what each child measures

BASELINE = r"""
import json
from collections import defaultdict

COLL = {"ALLREDUCE", "ALLGATHER", "BROADCAST", "REDUCESCATTER", "ALLTOALL", "ADASUM",
        "BARRIER", "JOIN"}
SIZE = {"uint8": 1, "int8": 1, "bool": 1, "uint16": 2, "int16": 2, "float16": 2, "int32": 4,
        "float32": 4, "int64": 8, "float64": 8}

def category(name):
    if name in COLL: return "comm"
    if name.startswith("NEGOTIATE_"): return "negotiate"
    if name == "WAIT_FOR_DATA": return "wait_for_data"
    if name == "WAIT_FOR_OTHER_TENSOR_DATA": return "wait_for_other_tensor_data"
    if name == "QUEUE": return "queue"
    if name.startswith("MEMCPY_"): return "memcpy"
    if name.startswith(("MPI_", "NCCL_", "GLOO_", "CCL_")): return "transport"
    return "other"

def union_length(spans):
    spans.sort()
    total, cur_s, cur_e = 0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None: total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None: total += cur_e - cur_s
    return total

def analyse(path):
    with open(path) as fh:
        events = json.load(fh)
    stacks = defaultdict(list)
    spans = defaultdict(list)
    tensor_us = defaultdict(int)
    ticks = {}
    last_ready = defaultdict(int)
    nbytes = 0
    for ev in events:
        ph = ev.get("ph")
        if ph == "B":
            stacks[ev["pid"]].append((ev["name"], ev["ts"]))
        elif ph == "E":
            stack = stacks[ev["pid"]]
            if not stack: continue
            name, t0 = stack.pop()
            cat = category(name)
            spans[cat].append((t0, ev["ts"]))
            if stack: continue
            if cat == "comm":
                tensor_us[ev["pid"]] += ev["ts"] - t0
                args = ev.get("args")
                if name == "ALLREDUCE" and args and "shape" in args:
                    n = 1
                    for d in args["shape"].strip("[]").split(","):
                        if d.strip(): n *= int(d)
                    nbytes += n * SIZE.get(args["dtype"], 0)
            elif cat == "negotiate" and ev["pid"] in ticks:
                last_ready[ticks.pop(ev["pid"])] += 1
        elif ph == "X":
            ticks[ev["pid"]] = ev["name"]
    out = {c + "_s": union_length(s) / 1e6 for c, s in spans.items()}
    out["allreduce_bytes"] = nbytes
    return out
"""

# (imports, timed work) per measurement: imports stay outside the timed region.
MEASURE = {
    "ours": (
        "from hpcscale.collect.traces.horovod import parse_timeline",
        "s = parse_timeline(PATH)\n"
        "d = s.as_json()\n"
        "RESULT = {k: d[k] for k in ('comm_s', 'negotiate_s', 'memcpy_s', 'transport_s',"
        " 'allreduce_bytes', 'events')}",
    ),
    "ours_python": (
        "from hpcscale.collect.traces.horovod import parse_timeline",
        "s = parse_timeline(PATH, engine='python')\n"
        "d = s.as_json()\n"
        "RESULT = {k: d[k] for k in ('comm_s', 'negotiate_s', 'memcpy_s', 'transport_s',"
        " 'allreduce_bytes', 'events')}",
    ),
    "baseline": (BASELINE, "RESULT = analyse(PATH)"),
    "orjson": (
        "import orjson",
        "with open(PATH, 'rb') as fh:\n    x = orjson.loads(fh.read())\n"
        "RESULT = {'records': len(x)}",
    ),
    "msgspec": (
        "import msgspec",
        "with open(PATH, 'rb') as fh:\n    x = msgspec.json.decode(fh.read())\n"
        "RESULT = {'records': len(x)}",
    ),
}

CHILD = r"""
import json, resource, sys, time
PATH = sys.argv[1]
{setup}
t0, c0 = time.perf_counter(), time.process_time()
{code}
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
# VmHWM: this process image's peak (ru_maxrss would count the parent's pages before exec).
try:
    with open("/proc/self/status") as fh:
        rss = next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:")) / 1024
except (OSError, StopIteration):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss, "result": RESULT}}))
"""


def measure(kind: str, path: Path) -> dict:
    setup, work = MEASURE[kind]
    code = CHILD.format(setup=setup, code=work)
    proc = subprocess.run(
        [PY, "-c", code, str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ours_engine() -> bool:
    from hpcscale.collect.traces.horovod import fast_engine_available

    return fast_engine_available()


# ---------------------------------------------------------------- a real source timeline


def real_timeline(tmp: Path) -> Path:
    """A tiny real run of jobs/tf/train.py at np=2 with the timeline on (about a minute)."""
    run_dir = tmp / "source-run"
    env = {
        **os.environ,
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    cmd = [
        "mpirun", "-np", "2", "--oversubscribe", "-x", "TF_CPP_MIN_LOG_LEVEL",
        PY, str(REPO / "jobs" / "tf" / "train.py"), "--model", "dcgan", "--run-dir", str(run_dir),
        "--batch-per-rank", "4", "--epochs", "1", "--steps-per-epoch", "20",
        "--image-size", "16", "--width", "8", "--latent-dim", "16", "--threads", "1",
        "--timeline",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=env, cwd=REPO, capture_output=True)
    return run_dir / "timeline.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, help="a real timeline to repeat (default: run one)")
    ap.add_argument("--size-mb", type=float, default=1024.0, help="big file size; default 1024")
    ap.add_argument(
        "--sample-mb", type=float, default=256.0, help="baseline/bare sample; 0 = whole file"
    )
    ap.add_argument("--tmp", type=Path, default=None, help="temp dir parent (default $TMPDIR)")
    ap.add_argument(
        "--repeat", type=int, default=2, help="runs per sample measurement, best kept; default 2"
    )
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="hpcscale-tlbench-", dir=a.tmp))
    try:
        source = a.source or real_timeline(tmp)
        big = tmp / "big.json"
        t = time.perf_counter()
        info = build(source, big, a.size_mb)
        size_mb = info["bytes"] / 1e6
        log(f"built {size_mb:.0f} MB ({info['copies']} copies of {source}) in "
            f"{time.perf_counter() - t:.0f} s")  # fmt: skip
        ours_big = measure("ours", big)
        log(f"ours on {size_mb:.0f} MB: {ours_big}")
        if a.sample_mb and a.sample_mb < size_mb:
            sample = tmp / "sample.json"
            sample_mb = make_sample(big, sample, a.sample_mb) / 1e6
        else:
            sample, sample_mb = big, size_mb
        runs = {
            k: min((measure(k, sample) for _ in range(a.repeat)), key=lambda r: r["cpu_s"])
            for k in ("ours", "ours_python", "baseline", "orjson", "msgspec")
        }
        for k, v in runs.items():
            log(f"{k} on {sample_mb:.0f} MB: {v}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ours, base = runs["ours"], runs["baseline"]
    bare_kind = min(("orjson", "msgspec"), key=lambda k: runs[k]["cpu_s"])
    bare = runs[bare_kind]
    agree = (
        all(
            abs(ours["result"][k] - base["result"].get(k, 0.0)) < 1e-6
            for k in ("comm_s", "negotiate_s", "memcpy_s", "transport_s")
        )
        and ours["result"]["allreduce_bytes"] == base["result"]["allreduce_bytes"]
        and ours["result"] == runs["ours_python"]["result"]
    )
    out = {
        "bench": "timeline",
        "file_mb": round(size_mb, 1),
        "ours_s": round(ours_big["wall_s"], 2),
        "ours_cpu_s": round(ours_big["cpu_s"], 2),
        "ours_mb_per_s": round(size_mb / ours_big["wall_s"], 1),
        "ours_cpu_mb_per_s": round(size_mb / ours_big["cpu_s"], 1),
        "ours_peak_rss_mb": round(ours_big["peak_rss_mb"], 1),
        "sample_mb": round(sample_mb, 1),
        "sample_ours_cpu_s": round(ours["cpu_s"], 2),
        "baseline_cpu_s": round(base["cpu_s"], 2),
        "baseline_peak_rss_mb": round(base["peak_rss_mb"], 1),
        "bare_decoder": bare_kind,
        "bare_cpu_s": round(bare["cpu_s"], 2),
        "other_bare_cpu_s": round(
            runs["msgspec" if bare_kind == "orjson" else "orjson"]["cpu_s"], 2
        ),
        "ratio_vs_baseline": round(base["cpu_s"] / ours["cpu_s"], 2),
        "engine": "c" if ours_engine() else "python",
        "python_engine_cpu_s": round(runs["ours_python"]["cpu_s"], 2),
        "python_engine_ratio_vs_baseline": round(base["cpu_s"] / runs["ours_python"]["cpu_s"], 2),
        "ratio_vs_baseline_wall": round(base["wall_s"] / ours["wall_s"], 2),
        "time_vs_bare": round(ours["cpu_s"] / bare["cpu_s"], 2),
        "same_figures_as_baseline": agree,
    }
    out["targets_met"] = (
        out["ratio_vs_baseline"] >= 5 and out["time_vs_bare"] <= 2 and out["ours_peak_rss_mb"] < 300
    )
    print(json.dumps(out), flush=True)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
