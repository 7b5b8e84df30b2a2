"""PyTorch DDP on the real local SLURM cluster (issue 31): the user's unmodified program across
2 nodes x 2 ranks under srun and under srun + torchrun (one per node), every rank given the
contract (MASTER_ADDR the first node's NodeAddr, 127.0.0.1 here; MASTER_PORT from the job id)
and all-reducing 1 + 2 + 3 + 4 = 10; and 2 concurrent 2-rank runs on one node, both complete
on their own ports. The submitting environment carries the loopback shim to the job's tasks
(sbatch exports it), so torch's stores listen on 127.0.0.1 only."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpcscale.backends.slurm.script import master_port
from hpcscale.devcluster.status import ClusterInfo
from tests.conftest import hpcscale
from tests.slurm_fixture import slurm_run
from tests.torch_fixture import ddp_campaign, given, needs_torch, shim_env

pytestmark = [needs_torch, pytest.mark.slurm]
ENDED = ("FAILED", "TIMEOUT", "COMPLETED", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY")


def _ended(name: str, env: dict[str, str], timeout: float = 420) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        proc = hpcscale("status", name, "--json", check=True, env=env)
        rows = json.loads(proc.stdout)[name]
        if rows and all(r["state"] in ENDED for r in rows):
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"not ended after {timeout} s: {rows}")
        time.sleep(3)


def _submit(path: Path, env: dict[str, str]) -> list[dict]:
    hpcscale("submit", str(path), check=True, env=env)
    rows = _ended(path.stem, env)
    assert [r["state"] for r in rows] == ["COMPLETED"] * len(rows), rows
    return rows


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_two_nodes_by_two_ranks_all_join_with_the_contract(
    launcher: str, slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    name = f"ddp_{launcher}"
    extra = "launcher: torchrun\n" if launcher == "torchrun" else ""
    path = ddp_campaign(tmp_path, name, "slurm-local", '{nodes: 2, layout: "2x1", batch: 4}', extra)
    (row,) = _submit(path, shim_env(tmp_path / "lib"))
    run_dir = Path(row["run_dir"])
    ranks = given(run_dir)
    assert sorted(ranks) == [0, 1, 2, 3], (run_dir / "ranks").iterdir()
    job = {v["SLURM_JOB_ID"] for v in ranks.values()}
    assert len(job) == 1 and job.pop().isdigit()
    for r, v in ranks.items():
        assert (v["RANK"], v["WORLD_SIZE"], v["LOCAL_RANK"], v["LOCAL_WORLD_SIZE"]) == (
            str(r), "4", str(r % 2), "2"
        )  # fmt: skip
        assert v["sum"] == "10"
        if launcher == "srun":  # torchrun's ranks hold its own store's address and port
            assert v["MASTER_ADDR"] == "127.0.0.1"  # node1's NodeAddr, not "node1"
            assert v["MASTER_PORT"] == str(master_port(int(v["SLURM_JOB_ID"])))
    last = (run_dir / "job.sbatch").read_text().splitlines()[-1]
    if launcher == "torchrun":
        assert last.startswith("srun --nodes=2 --ntasks=2 --ntasks-per-node=1 ")
        assert " -m torch.distributed.run --nnodes 2 --nproc-per-node 2 " in last


def test_two_concurrent_runs_on_one_node_both_complete(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """Two 2-rank runs held on one node (4 CPUs) at once: their ports differ, and both
    finish. The runs' own start and end times show that they did overlap. The node is one
    that is up (a fault test earlier in the session may have left one down)."""
    listing = slurm_run(slurm_cluster.env, "sinfo", "-h", "-N", "-o", "%N %T").stdout.split()
    up = [n for n, state in zip(listing[::2], listing[1::2], strict=True) if state == "idle"]
    assert up, listing
    path = ddp_campaign(
        tmp_path,
        "ddp_pair",
        "slurm-local",
        '{layout: "2x1", batch: 4}',
        f'repeats: 2\nmax_parallel: 2\nsbatch_options: ["--nodelist={up[0]}"]\n',
    )
    rows = _submit(path, shim_env(tmp_path / "lib"))
    assert len(rows) == 2
    ports = set()
    spans = []
    for row in rows:
        ranks = given(Path(row["run_dir"]))
        assert sorted(ranks) == [0, 1] and {v["sum"] for v in ranks.values()} == {"3"}
        ports |= {v["MASTER_PORT"] for v in ranks.values()}
        record = json.loads((Path(row["run_dir"]) / "exit.json").read_text())
        spans.append((record["started_unix_s"], record["ended_unix_s"]))
    assert len(ports) == 2
    (a0, a1), (b0, b1) = spans
    assert a0 < b1 and b0 < a1, f"the runs did not overlap: {spans}"
