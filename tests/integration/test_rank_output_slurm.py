"""Each rank's output kept apart under `srun` on the real local SLURM cluster (issue 27): the
same wrapper as under mpirun, its rank from the step's own variables, the job's slurm-<id>.out
still holding every rank's lines."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpcscale.collect.collector import load_results
from hpcscale.devcluster.status import ClusterInfo
from tests.command_fixture import campaign
from tests.conftest import hpcscale
from tests.integration.test_rank_output import RANKS, RATES

pytestmark = pytest.mark.slurm


def _ended(name: str, timeout: float) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        rows = json.loads(hpcscale("status", name, "--json", check=True).stdout)[name]
        if all(r["state"] in ("FAILED", "TIMEOUT", "COMPLETED", "CANCELLED") for r in rows):
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"not ended after {timeout} s: {rows}")
        time.sleep(3)


def test_srun_ranks_kept_apart(slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path) -> None:
    body = RANKS.replace("system: local", "system: slurm-local").replace(
        "args.first: [0, 1], mpi: [openmpi, gloo]", "args.first: [0, 1]"
    )
    path = campaign(tmp_path, body, program=RATES)
    hpcscale("submit", str(path), check=True)
    rows = _ended("ranks", timeout=300)
    assert [r["state"] for r in rows] == ["COMPLETED", "COMPLETED"], rows
    proc = hpcscale("collect", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    df = load_results("ranks")
    assert sorted(df["args.first"]) == [0, 1]
    for _, row in df.iterrows():
        assert row["total_rate"] == pytest.approx(210.0)  # 100 + 110, either print order
        assert row["rate_x_ranks"] == pytest.approx(200.0)  # rank 0's 100 x 2 ranks
        run_dir = Path(row["run_dir"])
        assert "srun " in (run_dir / "job.sbatch").read_text()
        merged = "".join(p.read_text() for p in run_dir.glob("slurm-*.out"))
        assert "rate 100" in merged and "rate 110" in merged
        for rank in (0, 1):
            own = (run_dir / "ranks" / f"{rank}.out").read_text().splitlines()
            # its two lines, stdout's and stderr's (two pipes: their order is not defined)
            assert sorted(own) == sorted([f"rate {100 + 10 * rank}", f"rank {rank} err line"])
