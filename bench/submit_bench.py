#!/usr/bin/env python3
"""Benchmark: SLURM submission by job arrays vs one sbatch per run, and status of 1,000 runs.

Against a real local cluster (the one SLURM_CONF names, else a fresh one started in a temp dir
on a free port block and stopped at the end), in one run:

- a 64-run campaign (4 resource shapes) of a stand-in program that writes metrics.json and
  exits (submission is under test, not TensorFlow), submitted twice into separate workdirs:
  as job arrays (hpcscale's default) and with one sbatch per run (`--no-array`). Reported: sbatch
  calls, wall time until all are submitted, and until all are finished (ledger refreshed every
  0.5 s);
- status of 1,000 runs: a ledger whose 1,000 rows point at the tasks of one finished
  1,000-task array, brought up to date by `refresh` (one sacct call); the baseline is one sacct
  per job (submitit's per-job polling style), timed on 50 jobs and scaled to 1,000.

Targets: array submission >= 5x faster than one per run; status of 1,000 runs < 0.5 s.
Ends by printing ONE JSON line.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpcscale.api import render_campaign  # noqa: E402
from hpcscale.backends.base import QuietReporter  # noqa: E402
from hpcscale.backends.slurm import query, sync  # noqa: E402
from hpcscale.backends.slurm import submit as slurm  # noqa: E402
from hpcscale.devcluster.cluster import LocalCluster  # noqa: E402
from hpcscale.devcluster.spec import first_free_port_base  # noqa: E402
from hpcscale.model.system import SHIPPED_DIR  # noqa: E402
from hpcscale.state.ledger import Ledger  # noqa: E402

STAND_IN = """import json, os, sys
from pathlib import Path
a = sys.argv
if os.environ.get("SLURM_PROCID", "0") == "0":
    Path(a[a.index("--run-dir") + 1], "metrics.json").write_text(json.dumps({"ok": 1}))
"""


def free_port_base() -> int:
    base = first_free_port_base(range(29000, 31000, 100))
    if base is None:
        raise SystemExit("no free port block in 29000-30999")
    return base


def count_sbatch() -> list[int]:
    """Wrap query.run so every sbatch call is counted."""
    calls = [0]
    real = query.run

    def counting(argv: list[str], *a: object, **kw: object) -> query.Result:
        if argv[0] == "sbatch":
            calls[0] += 1
        return real(argv, *a, **kw)  # type: ignore[arg-type]

    query.run = counting  # type: ignore[assignment]
    return calls


def campaign_file(tmp: Path) -> Path:
    jobs = tmp / "jobs"
    (jobs / "tf").mkdir(parents=True)
    (jobs / "tf" / "train.py").write_text(STAND_IN)
    system = yaml.safe_load((SHIPPED_DIR / "slurm-local.yaml").read_text())
    system.update({"name": "slurm-bench", "jobs_dir": str(jobs), "srun_mpi": "none"})
    (tmp / "system.yaml").write_text(yaml.safe_dump(system))
    spec = {
        "name": "bench64",
        "workload": {"model": "dcgan", "epochs": 1},
        "system": str(tmp / "system.yaml"),
        "scaling": "weak",
        "matrix": {"nodes": [1, 2], "layout": ["1x2", "2x1"], "batch": list(range(1, 17))},
    }
    path = tmp / "bench64.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def submit_and_finish(camp: Path, workdir: Path, array: bool, calls: list[int]) -> dict:
    _, _, rendered = render_campaign(camp, workdir)
    cdir = workdir / "bench64"
    before = calls[0]
    with Ledger(cdir) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered)
        t0 = time.perf_counter()
        slurm.submit_runs(
            rendered,
            ledger,
            cdir,
            force=False,
            array=array,
            max_parallel=None,
            reporter=QuietReporter(),
        )
        submitted = time.perf_counter() - t0
        deadline = time.monotonic() + 600
        while not all(r.terminal for r in ledger.rows()):
            if time.monotonic() > deadline:
                raise SystemExit("runs did not finish within 600 s")
            time.sleep(0.5)
            sync.refresh(ledger, cdir)
        finished = time.perf_counter() - t0
        states = {r.state for r in ledger.rows()}
    if states != {"COMPLETED"}:
        raise SystemExit(f"bench runs ended {states}")
    return {
        "runs": len(rendered),
        "sbatch": calls[0] - before,
        "submit_s": submitted,
        "finish_s": finished,
    }


def status_bench(tmp: Path) -> dict:
    res = query.run(
        [
            "sbatch",
            "--parsable",
            "--array=0-999",
            "--job-name=hpcscale.status1000.x",
            f"--output={tmp}/st-%A_%a.out",
            "--wrap=true",
        ],
        timeout=60,
    )
    if not res.ok:
        raise SystemExit(f"sbatch failed: {res.error}")
    jid = res.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 900
    while True:
        q, _ = query.squeue(["hpcscale.status1000.x"])
        if not q:
            break
        if time.monotonic() > deadline:
            raise SystemExit("1,000 tasks did not finish within 900 s")
        time.sleep(2)
    time.sleep(5)  # sacct trails squeue by a few seconds
    cdir = tmp / "status1000"
    ids = [f"r{i:04d}" for i in range(1000)]
    with Ledger(cdir) as ledger:
        ledger.ensure((rid, str(cdir)) for rid in ids)
        times = []
        for _ in range(3):
            ledger.apply(
                [
                    (
                        rid,
                        "SUBMITTED",
                        None,
                        {
                            "backend": "slurm",
                            "job_id": f"{jid}_{i}",
                            "array_job_id": jid,
                            "array_index": i,
                        },
                    )
                    for i, rid in enumerate(ids)
                ],
            )
            t0 = time.perf_counter()
            warnings = sync.refresh(ledger, cdir).warnings
            times.append(time.perf_counter() - t0)
            done = sum(r.state == "COMPLETED" for r in ledger.rows())
            if done != 1000 or warnings:
                raise SystemExit(f"status bench: {done} COMPLETED, warnings {warnings}")
    per_job = []
    for i in range(50):
        t0 = time.perf_counter()
        query.run(["sacct", "-X", "--parsable2", "-o", query.SACCT_FIELDS, "-j", f"{jid}_{i}"])
        per_job.append(time.perf_counter() - t0)
    return {"status_s": statistics.median(times), "baseline_s": sum(per_job) * 20}


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hpcscale-submit-bench-"))
    cluster = None
    try:
        if not os.environ.get("SLURM_CONF"):
            cluster = LocalCluster(tmp / "cluster")
            info = cluster.up(port_base=free_port_base(), cluster_name="hpcscalebench")
            os.environ["SLURM_CONF"] = info.slurm_conf
        calls = count_sbatch()
        camp = campaign_file(tmp)
        arrays = submit_and_finish(camp, tmp / "wd-array", True, calls)
        plain = submit_and_finish(camp, tmp / "wd-plain", False, calls)
        status = status_bench(tmp)
    finally:
        if cluster is not None:
            cluster.down()
        shutil.rmtree(tmp, ignore_errors=True)
    out = {
        "bench": "submit",
        "runs": arrays["runs"],
        "array_sbatch_calls": arrays["sbatch"],
        "per_run_sbatch_calls": plain["sbatch"],
        "ours_s": round(arrays["submit_s"], 3),
        "baseline_s": round(plain["submit_s"], 3),
        "ratio": round(plain["submit_s"] / arrays["submit_s"], 1),
        "array_all_finished_s": round(arrays["finish_s"], 2),
        "per_run_all_finished_s": round(plain["finish_s"], 2),
        "status_runs": 1000,
        "status_s": round(status["status_s"], 3),
        "status_per_job_sacct_s": round(status["baseline_s"], 2),
        "status_ratio": round(status["baseline_s"] / status["status_s"], 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
