"""PyTorch's torchrun, one per node, wrapping the launcher that starts one task per node: srun
inside a SLURM allocation (`srun --ntasks-per-node=1 torchrun ...`), nothing on this machine
(one node). ReFrame's LauncherWrapper, in one class: torchrun starts the ranks of its node
itself, and they meet at the job script's MASTER_ADDR:MASTER_PORT (c10d rendezvous).

torchrun runs as the job's `python -m torch.distributed.run` (nothing on PATH needed, the
profile's interpreter), with `--no-python`: the program's first word is its interpreter (the
profile's Python, or rankwrap's). It would set OMP_NUM_THREADS=1 for every rank; the job script
exports the layout's threads, which torchrun keeps."""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.util.shell import Raw

ENDPOINT = Raw('"$MASTER_ADDR:$MASTER_PORT"')
# the rendezvous id: the job's (every node's torchrun must give the same one)
RDZV_ID = Raw('"${SLURM_JOB_ID:-$MASTER_PORT}"')


def one_per_node(req: LaunchRequest) -> list[object]:
    """srun starting one torchrun per node, owning the CPUs of all the node's ranks (SLURM >=
    22.05 no longer hands sbatch's --cpus-per-task to srun: it is given here)."""
    run = req.run
    bind = [f"--cpu-bind={req.cpu_bind}"] if req.cpu_bind != "none" else []
    return [
        "srun",
        f"--nodes={run.nodes}",
        f"--ntasks={run.nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={run.tasks_per_node * run.threads_per_task}",
        *bind,
    ]


class Torchrun(Launcher):
    name = "torchrun"
    rendezvous = True  # only for a framework whose ranks meet at MASTER_ADDR:MASTER_PORT

    def argv(self, req: LaunchRequest) -> list[object]:
        run = req.run
        outer = one_per_node(req) if req.allocated else []
        return [
            *outer,
            req.python,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            run.nodes,
            "--nproc-per-node",
            run.tasks_per_node,
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            ENDPOINT,
            "--rdzv-id",
            RDZV_ID,
            *req.extra,
            "--no-python",
            *req.program,
        ]
