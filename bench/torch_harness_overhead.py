"""What the PyTorch DDP harness costs: images/s of a bare DDP DCGAN loop (written plainly below)
vs the same networks, batch and steps through jobs/torch/train.py, at 1 and 2 ranks under
mpirun, as bench/harness_overhead.py measures the Horovod harness. All in one run,
configurations interleaved and repeated.

Both join the process group the same way (jobs/torch/dist.py: rank from Open MPI's variables,
the store on 127.0.0.1, gloo); what is compared is the training loop around the same DDP step.
Other jobs on a shared machine only ever slow an epoch down, so each configuration is summarised
by its fastest epoch over all repeats (wall clock: images/s), and, steadier under contention, by
images per second of rank 0's process CPU time (`cpu` figures). Ends with ONE JSON line.

    python bench/torch_harness_overhead.py [--repeats 3] [--epochs 8] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from interleave import Interleaved

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "jobs" / "torch" / "train.py"
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"]
MPI_ENV = ["-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "OMP_NUM_THREADS"]


def bare(args: argparse.Namespace) -> None:
    """The loop a user writes by hand: same networks, optimizers, data shape, DDP and step
    (discriminator on real and detached fakes, then the generator through D's frozen module)."""
    sys.path.insert(0, str(REPO))
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    from jobs.torch import dist as ddp_env
    from jobs.torch.nets import build

    torch.set_num_threads(args.threads)
    denv = ddp_env.from_environ()
    store = ddp_env.init(denv, "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42 + rank)
    latent = 100
    nets = build("dcgan", args.image_size, width=args.width, latent_dim=latent)
    g, d = DDP(nets["generator"]), DDP(nets["discriminator"])
    lr = 2e-4 * world
    g_opt = torch.optim.Adam(g.parameters(), lr=lr, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(d.parameters(), lr=lr, betas=(0.5, 0.999))
    b, px = args.batch, args.image_size
    pool = [torch.rand(b, 3, px, px) * 2 - 1 for _ in range(4)]
    d_params = [p for p in d.module.parameters() if p.requires_grad]

    def step(real: torch.Tensor) -> None:
        fake = g(torch.randn(b, latent))
        d_opt.zero_grad()
        real_out, fake_out = d(real), d(fake.detach())
        d_loss = F.binary_cross_entropy_with_logits(
            real_out, torch.ones_like(real_out)
        ) + F.binary_cross_entropy_with_logits(fake_out, torch.zeros_like(fake_out))
        d_loss.backward()
        d_opt.step()
        g_opt.zero_grad()
        for p in d_params:
            p.requires_grad_(False)
        out = d.module(fake)
        for p in d_params:
            p.requires_grad_(True)
        F.binary_cross_entropy_with_logits(out, torch.ones_like(out)).backward()
        g_opt.step()

    step(pool[0])  # burn-in, as the harness's one untimed step
    times, cpus, i = [], [], 0
    for _ in range(args.epochs):
        t0, c0 = time.monotonic(), time.process_time()
        for _ in range(args.steps):
            step(pool[i % len(pool)])
            i += 1
        times.append(time.monotonic() - t0)
        cpus.append(time.process_time() - c0)
    if rank == 0:
        print("BARE " + json.dumps({"time": times, "cpu": cpus}), flush=True)
    dist.destroy_process_group()
    del store


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: list[str], threads: int) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "OMP_NUM_THREADS": str(threads),
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc


def measure(
    kind: str, np: int, args: argparse.Namespace, tmp: Path
) -> tuple[list[float], list[float]]:
    """Per epoch of one run: global images per wall second, per rank-0 CPU second."""
    images = args.batch * np * args.steps
    common = ["--image-size", str(args.image_size), "--width", str(args.width)]
    sizes = ["--threads", str(args.threads), "--epochs", str(args.epochs)]
    launch = [*MPIRUN, "-np", str(np), *MPI_ENV, sys.executable]
    if kind == "bare":
        cmd = [*launch, __file__, "--bare", "--batch", str(args.batch), "--steps",
               str(args.steps), *common, *sizes]  # fmt: skip
        out = _run(cmd, args.threads).stdout
        line = next(x for x in out.splitlines() if x.startswith("BARE "))
        clocks = json.loads(line[5:])
        return [images / t for t in clocks["time"]], [images / c for c in clocks["cpu"]]
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    cmd = [*launch, str(TRAIN), "--model", "dcgan", "--run-dir", str(run_dir),
           "--batch-per-rank", str(args.batch), "--steps-per-epoch", str(args.steps),
           *common, *sizes]  # fmt: skip
    _run(cmd, args.threads)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return metrics["images_per_s"], [images / c for c in metrics["epoch_cpu_s"]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bare", action="store_true", help="internal: run the bare loop (one rank)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    if args.bare:
        bare(args)
        return
    configs = [("bare", 1), ("harness", 1), ("bare", 2), ("harness", 2)]
    started, load0 = time.monotonic(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="hpcscale-bench-") as tmp:
        runs = Interleaved(configs, args.repeats, lambda k, n: measure(k, n, args, Path(tmp)))
    best, ratio = runs.best, runs.ratio

    result: dict[str, object] = {
        "bench": "torch_harness_overhead",
        "model": f"dcgan {args.image_size}px width {args.width} batch/rank {args.batch}",
        "launcher": "mpirun",
        "backend": "gloo",
        "epochs_per_run": args.epochs,
        "steps_per_epoch": args.steps,
        "repeats": args.repeats,
    }
    for np in (1, 2):
        result[f"np{np}_bare_ips"] = best("bare", np)
        result[f"np{np}_harness_ips"] = best("harness", np)
        result[f"np{np}_ratio"] = ratio(("harness", np), ("bare", np))
        result[f"np{np}_cpu_ratio"] = ratio(("harness", np), ("bare", np), per_cpu=True)
    result["max_lost_pct"] = round(
        100 * (1 - min(float(result["np1_ratio"]), float(result["np2_ratio"]))), 2
    )
    result["max_cpu_lost_pct"] = round(
        100 * (1 - min(float(result["np1_cpu_ratio"]), float(result["np2_cpu_ratio"]))), 2
    )
    result["target_lost_pct"] = 3.0
    result["loadavg_start_end"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
