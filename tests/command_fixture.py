"""What the command-workload tests share: a tiny program that prints figures (no MPI import,
so it starts fast under mpirun or srun), a campaign written beside it, and submit + collect."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.conftest import hpcscale

PRINTER = """\
import os, sys
env = os.environ
rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("SLURM_PROCID", 0)))
size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("SLURM_NTASKS", 1)))
print("ARGV", *sys.argv[1:], flush=True)
lr = float(sys.argv[sys.argv.index("--lr") + 1]) if "--lr" in sys.argv else 1.0
for i in range(3):
    print(f"{rank}: step {i} rate={10.0 * (i + 1) * lr:.1f} loss={1.0 / (i + 1):.3f}", flush=True)
if rank == 0:
    print(f"per-rank rate {25.0 * lr:.1f}", flush=True)
    print(f"elapsed {12.0 / size + 1.0:.3f}", flush=True)  # a time that shrinks with ranks
    with open(os.path.join(os.environ["HPCSCALE_RUN_DIR"], "train.log"), "w") as fh:
        fh.write("val_acc=0.5\\nval_acc=0.75\\n")
"""

# Rank r prints `rate 100+10r`; at 2 ranks rank 1 then raises KeyError(1): the job fails, yet
# both ranks printed a rate an extractor reads.
KEYERROR = """\
import os
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
print(f"rate {100 + 10 * rank}", flush=True)
if rank == 1:
    raise KeyError(1)
"""


def campaign(tmp: Path, body: str, program: str = PRINTER, name: str = "prog.py") -> Path:
    (tmp / name).write_text(program)
    path = tmp / "c.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def run_all(path: Path, *, collect_rc: int = 0, timeline: bool = False) -> str:
    hpcscale("submit", str(path), "--backend", "local", check=True)
    args = ["collect", str(path), *(["--timeline"] if timeline else [])]
    proc = hpcscale(*args)
    assert proc.returncode == collect_rc, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr
