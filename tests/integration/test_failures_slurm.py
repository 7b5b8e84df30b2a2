"""Failures explain themselves on the real local SLURM cluster: one array, two runs, one whose
program raises and one that overstays its 1-minute limit; `status --json` gives each its reason
from its own output (slurm-<job>.out in the run directory, and for the time limit slurmstepd's
words in the array task's file) and `logs` prints them. A stand-in program stands for
jobs/tf/train.py (as in test_slurm.py): SLURM's mechanics are under test, not TensorFlow."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from hpcscale.devcluster.status import ClusterInfo
from hpcscale.model.system import SHIPPED_DIR
from tests.conftest import hpcscale

pytestmark = pytest.mark.slurm

STAND_IN = """\
import sys, time
argv = sys.argv[1:]
mode = argv[argv.index("--mode") + 1]
print("[hpcscale] epoch 1/9 time_s=1.0 images_per_s=10.0", flush=True)
if mode == "raise":
    raise FileNotFoundError("[Errno 2] No such file or directory: '/scratch/celeba/000001.jpg'")
time.sleep(600)
"""


def _campaign(tmp_path: Path) -> Path:
    jobs = tmp_path / "jobs"
    (jobs / "tf").mkdir(parents=True)
    (jobs / "tf" / "train.py").write_text(STAND_IN)
    system = yaml.safe_load((SHIPPED_DIR / "slurm-local.yaml").read_text())
    system.update(
        {"name": "slurm-why", "jobs_dir": str(jobs), "max_parallel": None, "time_limit_min": 1}
    )
    (tmp_path / "slurm-why.yaml").write_text(yaml.safe_dump(system))
    spec = {
        "name": "why",
        "workload": {"model": "dcgan", "epochs": 1},
        "system": str(tmp_path / "slurm-why.yaml"),
        "scaling": "weak",
        "matrix": {"batch": 4, "args.mode": ["raise", "sleep"]},
    }
    path = tmp_path / "why.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _rows(timeout: float) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        rows = json.loads(hpcscale("status", "why", "--json", check=True).stdout)["why"]
        if all(r["state"] in ("FAILED", "TIMEOUT", "COMPLETED", "CANCELLED") for r in rows):
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"not ended after {timeout} s: {rows}")
        time.sleep(3)


def test_failed_and_timed_out_array_tasks_explain_themselves(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    hpcscale("submit", str(_campaign(tmp_path)), check=True)
    rows = {json.loads((Path(r["run_dir"]) / "run.json").read_text())["args"]["mode"]: r
            for r in _rows(timeout=300)}  # fmt: skip
    raised, slept = rows["raise"], rows["sleep"]
    assert raised["array_job_id"] is not None  # array tasks: their output files are per task
    assert raised["state"] == "FAILED"
    assert raised["reason"] == (
        "FileNotFoundError: [Errno 2] No such file or directory: '/scratch/celeba/000001.jpg'"
    )
    assert Path(raised["output"]).parent == Path(raised["run_dir"])
    assert Path(raised["output"]).name.startswith("slurm-")
    assert slept["state"] == "TIMEOUT"
    assert "CANCELLED AT" in slept["reason"] and slept["reason"].endswith("DUE TO TIME LIMIT")
    logs = hpcscale("logs", slept["run_id"][:8], check=True).stdout
    assert "[hpcscale] epoch 1/9" in logs and "DUE TO TIME LIMIT" in logs
