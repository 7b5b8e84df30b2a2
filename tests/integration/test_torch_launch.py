"""A user's unmodified DDP program (examples/ddp_allreduce.py, `init_method="env://"`) run by
hpcscale on this machine (issue 31): under mpirun and under torchrun every rank gets RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, joins, and all-reduces
rank + 1 to the known sum W (W + 1) / 2; its rate is collected from every rank's own output.
Real processes (mpirun, torchrun, torch's gloo), no mocked launcher."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcscale.collect.collector import load_results
from tests.conftest import hpcscale
from tests.torch_fixture import ddp_campaign, given, needs_torch, shim_env

pytestmark = [needs_torch, pytest.mark.mpi]


def _run(path: Path, env: dict[str, str]) -> Path:
    proc = hpcscale("submit", str(path), "--backend", "local", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = hpcscale("collect", str(path), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    df = load_results(path.stem)
    assert len(df) == 1 and df["state"].iloc[0] == "COMPLETED"
    assert df["rate"].iloc[0] > 0  # both ranks' rates, summed (ranks: all)
    return Path(df["run_dir"].iloc[0])


def test_mpirun_gives_every_rank_the_contract_and_a_local_rendezvous(
    tmp_path: Path, workdir: Path
) -> None:
    path = ddp_campaign(tmp_path, "ddp_mpirun", "local", '{layout: "2x1", batch: 4}')
    run_dir = _run(path, shim_env(tmp_path / "lib"))
    ranks = given(run_dir)
    assert sorted(ranks) == [0, 1]
    port = ranks[0]["MASTER_PORT"]
    assert port.isdigit() and 1024 <= int(port) < 65536
    for r, v in ranks.items():
        assert v == {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r),
                     "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": port, "SLURM_JOB_ID": "-", "sum": "3"}  # fmt: skip
    assert "-x MASTER_ADDR -x MASTER_PORT" in (run_dir / "job.sbatch").read_text()


def test_torchrun_runs_the_unmodified_program_on_this_machine(
    tmp_path: Path, workdir: Path
) -> None:
    """`launcher: torchrun` from the campaign: one torchrun (one node) starting both ranks,
    which then hold torchrun's own rendezvous values."""
    path = ddp_campaign(
        tmp_path, "ddp_torchrun", "local", '{layout: "2x1", batch: 4}', "launcher: torchrun\n"
    )
    run_dir = _run(path, shim_env(tmp_path / "lib"))
    script = (run_dir / "job.sbatch").read_text()
    assert " -m torch.distributed.run --nnodes 1 --nproc-per-node 2 " in script
    assert "mpirun" not in script.splitlines()[-1]
    ranks = given(run_dir)
    assert sorted(ranks) == [0, 1]
    for r, v in ranks.items():
        assert (v["RANK"], v["WORLD_SIZE"], v["LOCAL_RANK"], v["LOCAL_WORLD_SIZE"]) == (
            str(r),
            "2",
            str(r),
            "2",
        )
        assert v["sum"] == "3"
