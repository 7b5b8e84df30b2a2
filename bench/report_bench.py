#!/usr/bin/env python3
"""Benchmark: `hpcscale collect --timeline` and `hpcscale report` at 250 and 1,000 runs (issue 23).

The campaign is the issue's knob sweep on system `local`: layouts 1x1, 2x1 x fusion_threshold_mb
1-25 x cycle_time_ms 1-20 (1,000 runs; 250 runs: cycle_time_ms 1-5; --big adds 10,000 runs:
cycle_time_ms 1-200). It is rendered with `hpcscale render`, then every run directory is given
the metrics.json, steps.json, timeline.json and samples/ of a real finished quickstart run with
the same ranks (campaigns/quickstart.yaml, run once with the local backend into --source and
reused from there). What must match is adjusted: each run's metrics.json gets its own run
directory in `argv`, and its start and end times (and the load samples') are moved so the runs
ran one after another, as the local backend runs them (a copy claiming the same minute as 999
others would be a contention study, not a knob sweep). steps.json and timeline.json are hard
links to the real run's files (their clocks agree with each other, which is what collect uses).

Each command runs as the console script a user types, in a fresh process, in this order per
size: `collect NAME --timeline` with no cache (first), again (cached), then with the cache and
results removed `report NAME` (first: it collects too), and `report NAME` again (cached: the
collect inside it reads the cache, as after a `collect`). Printed: the CPU seconds (user +
system, of the process: what the targets are judged on, as the machine is shared and a loaded
machine stretches wall time, not work) and the wall seconds of each, the CPU milliseconds per
run, and the ratio CPU time(1,000) / time(250) (4 is linear).

The cached report, on which the targets are judged, is timed --repeat times (default 5) in a
row: one sample on a shared or noisy machine (its speed moves by +-20 %) decides nothing. Each
sample is printed (`report_cached_cpu_samples_s`, with `report_cached_cpu_min_s`), and
`report_cached` is their median, which the checks judge (likewise `overlap_cpu_s`'s
`report_cached`, with its samples and min in `overlap_report_cached_cpu_samples_s` / `_min_s`).

Targets (issue 23): report (cached) of 1,000 runs < 5 s; the 1,000 / 250 ratio < 5 for collect
and report; with --big, 10,000 runs reported (cached) in < 60 s. A case (unless
--no-overlap; alone with --only-overlap): 1,000 runs all started within a second, so every run
overlapped every other on this machine and the shared-machine check flags them all; reported
(cached) in < 5 s too (it took 20 s when the check compared every pair). Progress goes to
stderr; the last line on stdout is ONE JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAME = "p7"
SIZES = (250, 1000)
BIG = 10_000
STEPS = ("collect_first", "collect_cached", "report_first", "report_cached")
TARGET_REPORT_1000_S = 5.0
TARGET_RATIO = 5.0
TARGET_REPORT_BIG_S = 60.0
REPEAT = 5  # samples of the cached report; the median is judged
OVERLAP_RUNS = 1000  # 1,000 runs that all overlapped, reported (cached) in < 5 s
DEFAULT_SOURCE = Path(
    os.environ.get("HPCSCALE_BENCH_CACHE", Path.home() / ".cache" / "hpcscale" / "report_bench")
)


def log(msg: str) -> None:
    print(f"[report_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def campaign_text(runs: int) -> str:
    """The issue's sweep with runs / 50 cycle times (2 layouts x 25 fusion buffers each)."""
    if runs % 50:
        raise SystemExit(f"--sizes: {runs} is not a multiple of 50 (2 layouts x 25 buffers)")
    cycles = list(range(1, runs // 50 + 1))
    return f"""# issue 23's sweep: layouts x fusion buffer x cycle time on this machine, {runs} runs
name: {NAME}
description: fusion buffer x cycle time at 1 and 2 ranks (bench/report_bench.py)
workload:
  model: dcgan
  epochs: 2
  args: {{image_size: 32, dataset_size: 512}}
system: local
scaling: weak
matrix:
  layout: ["1x1", "2x1"]
  batch: 16
  fusion_threshold_mb: {list(range(1, 26))}
  cycle_time_ms: {cycles}
collect: {{timeline: true}}
"""


# ---------------------------------------------------------------- the real finished runs


def finished_runs(source: Path) -> dict[int, Path]:
    """ranks -> a finished quickstart run directory under `source` (a workdir or campaign dir)."""
    out: dict[int, Path] = {}
    for run_json in sorted(source.glob("**/runs/*/run.json")):
        d = run_json.parent
        if not all((d / f).is_file() for f in ("metrics.json", "steps.json", "timeline.json")):
            continue
        ranks = json.loads(run_json.read_text()).get("ranks")
        out.setdefault(int(ranks), d)
    return out


def ensure_source(source: Path, exe: list[str]) -> dict[int, Path]:
    """The real runs with 1 and 2 ranks: found under `source`, else made there by submitting
    campaigns/quickstart.yaml with the local backend (about 2-3 minutes, once)."""
    runs = finished_runs(source) if source.exists() else {}
    if not {1, 2} <= runs.keys():
        log(f"no finished quickstart under {source}: running campaigns/quickstart.yaml there")
        source.mkdir(parents=True, exist_ok=True)
        quickstart = REPO / "campaigns" / "quickstart.yaml"
        argv = [*exe, "submit", str(quickstart), "--backend", "local", "--workdir", str(source)]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        runs = finished_runs(source)
        if not {1, 2} <= runs.keys():
            raise SystemExit(f"the quickstart under {source} did not finish its 1 and 2 rank runs")
    return {r: runs[r] for r in (1, 2)}


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system: a copy
        shutil.copy2(src, dst)


def fill(campaign_dir: Path, real: dict[int, Path], overlap: bool = False) -> int:
    """Give every rendered run the real run's files with its ranks (see the module); the
    number of runs filled. tests/integration/test_report_scale.py fills its sweep with it too.
    `overlap`: every run starts within a second of the first instead, so all of them ran at
    once on this machine (the shared-machine check's worst case: every run flagged, each by
    all others)."""
    from hpcscale.formats.exit_record import write_exit_record

    metrics = {r: json.loads((d / "metrics.json").read_text()) for r, d in real.items()}
    durations = [m["finished_unix_s"] - m["started_unix_s"] for m in metrics.values()]
    gap = max(durations) + 1.0
    dirs = sorted(p for p in (campaign_dir / "runs").iterdir() if (p / "run.json").is_file())
    for i, d in enumerate(dirs):
        ranks = int(json.loads((d / "run.json").read_text())["ranks"])
        m = json.loads(json.dumps(metrics[ranks]))
        at = i * 1e-3 if overlap else i * gap  # overlap: all together, a millisecond apart
        shift = at - (m["started_unix_s"] - metrics[1]["started_unix_s"])
        m["started_unix_s"] += shift
        m["finished_unix_s"] += shift
        for when in ("start", "end"):
            sample = (m.get("load") or {}).get(when)
            if isinstance(sample, dict) and isinstance(sample.get("unix_s"), int | float):
                sample["unix_s"] += shift
        argv = (m.get("provenance") or {}).get("argv")
        if isinstance(argv, list) and "--run-dir" in argv:
            argv[argv.index("--run-dir") + 1] = str(d)
        (d / "metrics.json").write_text(json.dumps(m, indent=2))
        write_exit_record(d, 0, m["finished_unix_s"])  # as its job script would: it completed
        for name in ("steps.json", "timeline.json"):
            _link(real[ranks] / name, d / name)
        if (real[ranks] / "samples").is_dir():
            (d / "samples").mkdir(exist_ok=True)
            for png in (real[ranks] / "samples").glob("*.png"):
                _link(png, d / "samples" / png.name)
    return len(dirs)


# ---------------------------------------------------------------- timing


def timed(argv: list[str], timeout: float) -> tuple[float, float, bool]:
    """Wall and CPU (user + system) seconds of one process, and whether it finished within
    `timeout` (else it is killed; the times are those until then). CPU time is what the targets
    are judged on: the machine is shared (a loaded machine stretches wall time, not work).
    Bytecode caches are written and read as for an installed package (`make bench` unexports
    PYTHONDONTWRITEBYTECODE likewise): with it set, every command compiled hpcscale again,
    about 1.5-2 s of CPU that a user's console script does not spend."""
    drop = ("FORCE_COLOR", "TTY_COMPATIBLE", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if wall >= timeout and proc.returncode < 0:
            return wall, usage.ru_utime + usage.ru_stime, False
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{tail}")
    return wall, usage.ru_utime + usage.ru_stime, True


def measure(
    exe: list[str],
    real: dict[int, Path],
    runs: int,
    tmp: Path,
    timeout: float,
    overlap: bool = False,
    keep: bool = False,
    repeat: int = REPEAT,
) -> dict:
    """Render and fill a campaign of `runs` runs (all at once with `overlap`), then time the
    four steps (see the module), the cached report `repeat` times: its entry is the median
    (wall and CPU) and "report_cached_samples" lists each sample's CPU seconds. `keep`: the
    workdir stays (to profile a report of it)."""
    wd = tmp / f"n{runs}{'-overlap' if overlap else ''}"
    yaml = tmp / f"{NAME}-{runs}.yaml"
    yaml.write_text(campaign_text(runs))
    shutil.rmtree(wd, ignore_errors=True)  # one kept (--keep) before is staged again
    t0 = time.perf_counter()
    subprocess.run(
        [*exe, "render", str(yaml), "-w", str(wd)], check=True, stdout=subprocess.DEVNULL
    )
    filled = fill(wd / NAME, real, overlap)
    log(f"{runs} runs: rendered and filled {filled} in {time.perf_counter() - t0:.1f} s")
    if filled != runs:
        raise SystemExit(f"{runs} runs asked, {filled} rendered")
    collect = [*exe, "collect", NAME, "--timeline", "-w", str(wd)]
    report = [*exe, "report", NAME, "-w", str(wd)]
    out: dict = {}
    for step, argv in zip(STEPS, (collect, collect, report, report), strict=True):
        if step == "report_first":
            for f in (".collect-cache.json", "results.parquet", "results.csv"):
                (wd / NAME / f).unlink(missing_ok=True)
        samples: list[tuple[float, float]] = []
        for i in range(repeat if step == "report_cached" else 1):
            wall, cpu, finished = timed(argv, timeout)
            said = "" if finished else f"NOT FINISHED, killed after {timeout:.0f} s: "
            nth = f" {i + 1}/{repeat}" if step == "report_cached" else ""
            log(f"{runs} runs: {step}{nth} {said}{cpu:.2f} s CPU, {wall:.2f} s wall")
            if not finished:  # the later samples and steps would not finish either
                out[step] = (wall, cpu, False)
                break
            samples.append((wall, cpu))
        else:
            walls, cpus = zip(*samples, strict=True)
            out[step] = (statistics.median(walls), statistics.median(cpus), True)
            if step == "report_cached":
                out["report_cached_samples"] = list(cpus)
                log(f"{runs} runs: {step} median {out[step][1]:.2f} s CPU, min {min(cpus):.2f}")
            continue
        break
    if (wd / NAME / "report" / "index.md").exists():
        size = (wd / NAME / "report" / "index.md").stat().st_size
        log(f"{runs} runs: index.md {size / 1e3:.0f} kB")
    if keep:
        log(f"{runs} runs: kept: {' '.join(report)}")
    else:
        shutil.rmtree(wd, ignore_errors=True)
    return out


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", action="store_true", help=f"also {BIG:,} runs")
    ap.add_argument(
        "--source",
        type=Path,
        default=DEFAULT_SOURCE,
        help="a workdir (or campaign dir) with a finished quickstart; made there when it has "
        "none (default: $HPCSCALE_BENCH_CACHE or ~/.cache/hpcscale/report_bench)",
    )
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="campaign sizes (runs)"
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per command, at most")
    ap.add_argument(
        "--no-overlap",
        action="store_true",
        help=f"skip the case of {OVERLAP_RUNS:,} runs that all ran at once",
    )
    ap.add_argument("--only-overlap", action="store_true", help="only that case")
    ap.add_argument(
        "--repeat",
        type=int,
        default=REPEAT,
        help=f"samples of each cached report; the median is judged (default {REPEAT})",
    )
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="stage the campaigns in DIR (made if missing) and keep them there: `report` of one "
        "again is the cached report, for a profile (the command is printed)",
    )
    ap.add_argument(
        "--hpcscale",
        default=None,
        help="the command to time (default: this interpreter's `hpcscale` console script)",
    )
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    exe = (
        args.hpcscale.split()
        if args.hpcscale
        else [shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"]
    )
    sizes = [] if args.only_overlap else sorted(set(args.sizes) | ({BIG} if args.big else set()))
    real = ensure_source(args.source.expanduser(), exe)
    log(f"real runs: {', '.join(f'{r} rank(s) {d}' for r, d in real.items())}")
    times: dict[int, dict] = {}
    keep = args.keep is not None
    if keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="report_bench.") as scratch:
        tmp = args.keep.resolve() if keep else Path(scratch)
        for n in sizes:
            times[n] = measure(exe, real, n, tmp, args.timeout, keep=keep, repeat=args.repeat)
        over = {}
        if args.only_overlap or not args.no_overlap:
            over = measure(
                exe, real, OVERLAP_RUNS, tmp, args.timeout, True, keep, repeat=args.repeat
            )

    def cpu(n: int, step: str) -> float | None:
        """CPU seconds of a step that finished (None: not run, or killed)."""
        got = times[n].get(step)
        return None if got is None or not got[2] else got[1]

    result: dict = {"bench": "report_scale", "runs": sizes, "repeat": args.repeat}
    for step in STEPS:
        result[f"{step}_cpu_s"] = {str(n): _r(cpu(n, step)) for n in sizes}
        result[f"{step}_wall_s"] = {
            str(n): _r(None if cpu(n, step) is None else times[n][step][0]) for n in sizes
        }
        killed = {
            str(n): _r(times[n][step][1])
            for n in sizes
            if cpu(n, step) is None and step in times[n]
        }
        if killed:  # CPU seconds spent before the timeout killed it
            result[f"{step}_killed_after_cpu_s"] = killed
        result[f"{step}_cpu_ms_per_run"] = {
            str(n): _r(None if cpu(n, step) is None else 1e3 * cpu(n, step) / n, 2) for n in sizes
        }
    # every sample of the cached report (its _cpu_s above is their median, which is judged)
    result["report_cached_cpu_samples_s"] = {
        str(n): [_r(c) for c in times[n].get("report_cached_samples", [])] for n in sizes
    }
    result["report_cached_cpu_min_s"] = {
        str(n): _r(min(times[n]["report_cached_samples"]))
        if times[n].get("report_cached_samples")
        else None
        for n in sizes
    }
    ratios: dict[str, float | None] = {}
    if {250, 1000} <= set(sizes):
        for step in STEPS:
            a, b = cpu(250, step), cpu(1000, step)
            ratios[step] = None if a is None or b is None else round(b / a, 2)
    result["cpu_ratio_1000_250"] = ratios
    checks: dict[str, bool] = {}
    if 1000 in times:
        t = cpu(1000, "report_cached")
        checks["report_1000_under_5s"] = t is not None and t < TARGET_REPORT_1000_S
    if ratios:
        checks["ratio_under_5"] = all(r is not None and r < TARGET_RATIO for r in ratios.values())
    if BIG in times:
        t = cpu(BIG, "report_cached")
        checks["report_10000_under_60s"] = t is not None and t < TARGET_REPORT_BIG_S
    if over:  # every run overlapped every other: the shared-machine check's worst case
        done = {step: over[step] for step in STEPS if step in over and over[step][2]}
        result["overlap_runs"] = OVERLAP_RUNS
        result["overlap_cpu_s"] = {step: _r(got[1]) for step, got in done.items()}
        result["overlap_wall_s"] = {step: _r(got[0]) for step, got in done.items()}
        cached = over.get("report_cached_samples", [])
        result["overlap_report_cached_cpu_samples_s"] = [_r(c) for c in cached]
        result["overlap_report_cached_cpu_min_s"] = _r(min(cached)) if cached else None
        t = result["overlap_cpu_s"].get("report_cached")  # the median of the samples
        checks["report_1000_overlap_under_5s"] = t is not None and t < TARGET_REPORT_1000_S
    result["targets"] = {
        "report_1000_s": TARGET_REPORT_1000_S,
        "ratio_1000_250": TARGET_RATIO,
        "report_10000_s": TARGET_REPORT_BIG_S,
    }
    result["checks"] = checks
    result["ok"] = bool(checks) and all(checks.values())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
