"""Which rank `hpcscale.probe` believes it is: under `srun`/`mpirun` -> torchrun each
worker of a node inherits the node's OMPI_*/PMI_*/SLURM_* rank, and only torchrun's RANK tells
the workers apart; MVAPICH2's own variables are read as the bundled jobs read them. Each case
starts a real process with the environment a launcher would give it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = """\
from hpcscale import probe
print("RANK", probe.rank(), "SIZE", probe.world_size(), flush=True)
probe.event("global_batch_size", 8)
"""
LAUNCHER_PREFIXES = (
    "OMPI_", "PMI_", "PMIX_", "SLURM", "MV2_", "HOROVOD_", "RANK", "WORLD_SIZE", "TORCHELASTIC_"
)  # fmt: skip


def _probe(tmp_path: Path, env: dict[str, str]) -> tuple[str, bool]:
    script = tmp_path / "p.py"
    script.write_text(SCRIPT)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    proc = subprocess.run(
        [sys.executable, str(script)],
        env={**clean, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    (said,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RANK ")]
    return said, ":::MLLOG" in proc.stdout


@pytest.mark.parametrize(
    ("env", "said", "writes"),
    [
        # srun -> torchrun: node 0's second worker (torchrun sets RANK per worker)
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "RANK": "1", "WORLD_SIZE": "8"},
         "RANK 1 SIZE 8", False),
        # mpirun -> torchrun: node 1's first worker is global rank 4
        ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "RANK": "4",
          "WORLD_SIZE": "8"}, "RANK 4 SIZE 8", False),
        # the node-0 worker that is rank 0 writes, whatever its node's OMPI rank
        ({"OMPI_COMM_WORLD_RANK": "1", "PMI_RANK": "1", "RANK": "0", "WORLD_SIZE": "8"},
         "RANK 0 SIZE 8", True),
        # MVAPICH2's mpirun_rsh: MV2_COMM_WORLD_* only
        ({"MV2_COMM_WORLD_RANK": "3", "MV2_COMM_WORLD_SIZE": "4"}, "RANK 3 SIZE 4", False),
        ({"MV2_COMM_WORLD_RANK": "0", "MV2_COMM_WORLD_SIZE": "4"}, "RANK 0 SIZE 4", True),
        # a plain MPI launch still reads Open MPI's variables
        ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, "RANK 1 SIZE 2", False),
        # a launcher inside a batch job: the batch step's SLURM_PROCID 0 is every rank's, the
        # launcher's own variables tell them apart (horovodrun --gloo sets only its own)
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "HOROVOD_RANK": "1", "HOROVOD_SIZE": "2"},
         "RANK 1 SIZE 2", False),
        # Hydra's mpiexec inside a job on a PMIx site: the rank's PMI_RANK, not the PMIX_RANK
        # (its node) it inherits from the proxy srun started
        ({"SLURM_PROCID": "1", "PMIX_RANK": "1", "PMI_RANK": "5", "PMI_SIZE": "8"},
         "RANK 5 SIZE 8", False),
        ({"SLURM_PROCID": "0", "PMIX_RANK": "0", "PMI_RANK": "1", "PMI_SIZE": "8"},
         "RANK 1 SIZE 8", False),
        # horovodrun inside an srun --mpi=pmix step
        ({"SLURM_PROCID": "0", "PMIX_RANK": "0", "HOROVOD_RANK": "5", "HOROVOD_SIZE": "8"},
         "RANK 5 SIZE 8", False),
        # srun --mpi=pmix alone
        ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "PMIX_RANK": "3"}, "RANK 3 SIZE 4", False),
    ],
)  # fmt: skip
def test_probe_reads_the_innermost_launchers_rank(
    tmp_path: Path, env: dict[str, str], said: str, writes: bool
) -> None:
    assert _probe(tmp_path, env) == (said, writes)


@pytest.mark.parametrize(
    ("env", "rank"),
    [
        ({"SLURM_PROCID": "0", "HOROVOD_RANK": "2"}, "2"),  # a launcher inside a batch job
        ({"SLURM_PROCID": "1", "PMIX_RANK": "1", "PMI_RANK": "5"}, "5"),  # Hydra under a proxy
        ({"SLURM_PROCID": "1", "RANK": "5"}, "1"),  # RANK without torchrun's marker: not a rank
        ({"SLURM_PROCID": "1", "RANK": "5", "TORCHELASTIC_RUN_ID": "j"}, "5"),  # srun -> torchrun
    ],
)
def test_rankwrap_run_by_its_path_reads_the_launchers_variables(
    tmp_path: Path, env: dict[str, str], rank: str
) -> None:
    """The job's Python runs rankwrap.py by its path (-I: no PYTHONPATH, no script directory on
    sys.path); it reads the launchers' variables from the registry beside it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    clean.pop("PYTHONPATH", None)
    clean.pop("TORCHELASTIC_RUN_ID", None)
    wrapper = REPO / "hpcscale" / "rankwrap.py"
    subprocess.run(
        [sys.executable, "-I", str(wrapper), "--dir", str(tmp_path), "--",
         sys.executable, "-c", "print('hi')"],
        env={**clean, **env}, cwd=tmp_path, capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    assert [p.name for p in (tmp_path / "ranks").iterdir()] == [f"{rank}.out"]
