"""A user's PyTorch DDP program as it is usually written: nothing hpcscale-specific. It joins
the process group from the environment (`init_method="env://"`: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), all-reduces rank + 1 (whose sum over W ranks is W (W + 1) / 2),
takes a few DDP steps of a tiny model, and prints on every rank what it was given and a rate.

    torchrun --nproc-per-node 2 examples/ddp_allreduce.py
    # or as an hpcscale command workload with `framework: torch` (docs/pytorch.md)
"""

import os
import socket
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
         "SLURM_JOB_ID")  # fmt: skip
STEPS, BATCH = 20, 16


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == int(os.environ["WORLD_SIZE"]), "the group is not the one the launcher set"
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    given = " ".join(f"{k}={os.environ.get(k, '-')}" for k in NAMES)
    print(f"ddp {given} host={socket.gethostname()} sum={total.item():g}", flush=True)
    torch.manual_seed(rank)
    model = DDP(torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = time.perf_counter()
    for _ in range(STEPS):
        x = torch.randn(BATCH, 32)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    rate = STEPS * BATCH / (time.perf_counter() - start)
    print(f"rank {rank}: {rate:.1f} samples/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
