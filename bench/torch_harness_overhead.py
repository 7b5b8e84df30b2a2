"""What the PyTorch DDP harness costs (issue #31: at most 3 %): images/s of a bare DDP DCGAN loop
(written plainly below) vs the same networks, batch and steps through jobs/torch/train.py, at 1
and 2 ranks under mpirun, as bench/harness_overhead.py measures the Horovod harness.

Both join the process group the same way (jobs/torch/dist.py: rank from Open MPI's variables,
the store on 127.0.0.1, gloo); what is compared is the training loop around the same DDP step.

Estimator (bench/overhead_stats.py, shared with the Horovod bench). On the idle 2-core machine
the bare loop alone moves by ~8 % from one launch to the next, so the best epoch of each side
over a few repeats cannot resolve 3 %. Instead:
- a pair is one bare run and one harness run of the same rank count, back to back, bare first
  in odd pairs and harness first in even ones (a drift of the machine hits both sides alike);
  `--pairs` pairs per rank count;
- the schedule (`--schedule`, `schedule` in the JSON line) is "blocked" by default: all of
  np1's pairs, then all of np2's, so the rank count changes once, and `--settle` (1) discarded
  runs (a bare one) go before each block (`settle_runs`: how many in all). Why: with the pairs
  of both rank counts interleaved (`--schedule interleaved --settle 0`, the session-13 method),
  the first np1 run after an np2 pair was the slower one in 8 of 10 pairs on the idle machine
  (np1 order effect 1.155), which left np1's interval at [0.72, 1.26] while the harness's own
  step costs the bare one's: the same DCGAN step through train.py's functions and bookkeeping
  (loss .item()s, step log, no-op tracer, the synthetic pool's cycling) and through the bare
  loop, alternated in blocks of 4 steps within one process, took the same thread CPU time
  (harness/bare median ratios 1.013, 1.007, 1.000 over 20, 80 and 80 blocks; no extra
  threads, the same torch thread counts); whole np1 processes (user + sys CPU of 64 steps:
  2 x 36 minus 2 x 4 per epoch, 3 launches of each side per order, busy machine) gave
  harness/bare 1.127 with bare first and 0.877 with harness first, crossover 0.994: the
  order, not the harness. 10 pairs take 42 launches instead of 40;
- a run counts as the median of its epochs after the first `--warmup-epochs` (images/s by wall
  clock, and images per second of rank 0's process CPU time); an epoch is its steps, as
  metrics.json's `images_per_s`: what the harness does between epochs (the loss all-reduce, its
  log line) and after the last (weights digest, files) is not in the figure;
- per rank count the overhead is the median over pairs of harness / bare (`npN_ratio`, by CPU
  time `npN_cpu_ratio`), with a distribution-free 95 % confidence interval for that median
  (`npN_ci`, `npN_cpu_ci`): sorted ratios x(1) <= ... <= x(n), [x(k), x(n+1-k)] with the largest
  k whose coverage 1 - 2 P(Binomial(n, 1/2) <= k - 1) is >= 95 % (10 pairs: x(2)..x(9), 97.9 %;
  `npN_ci_coverage`);
- `max_lost_pct` = (1 - the worst rank count's median ratio) x 100; `max_lost_ci_high_pct` its
  upper bound (the largest 1 - CI low over rank counts); `verdict`: "met" when that upper
  bound is <= `target_pct` (3), "not met" when some rank count's whole CI lies below
  1 - 3 %, else "unresolved" (run more pairs: `--pairs 20`, x(6)..x(15), takes about 22
  minutes); "too few pairs" under 6 pairs, whose CI covers less than 95 % (a smoke run).
  `max_cpu_lost_pct` likewise by CPU time.

The issue's figure, on an otherwise idle machine (about 11 minutes on 2 cores: 42 launches of
~16 s each); ends with ONE JSON line:

    .venv/bin/python bench/torch_harness_overhead.py --pairs 10 --epochs 6 --steps 16
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

from overhead_stats import Paired, crossover, fields, lost, median

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "jobs" / "torch" / "train.py"
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"]
RANKS = (1, 2)
PAIRS, EPOCHS, STEPS = 10, 6, 16  # the defaults: the figure (see the docstring)
TARGET_PCT = 3.0  # issue #31: the harness loses at most 3 % against the bare loop
MPI_ENV = ["-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "OMP_NUM_THREADS"]
SCHEDULES = ("blocked", "interleaved")  # overhead_stats.schedule: blocked=True / False


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
    p.add_argument("--pairs", type=int, default=PAIRS, help="bare/harness pairs per rank count")
    p.add_argument("--epochs", type=int, default=EPOCHS, help="per run, warm-up included")
    p.add_argument("--warmup-epochs", type=int, default=1, help="per run, left out")
    p.add_argument("--steps", type=int, default=STEPS, help="per epoch")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="blocked",
        help="blocked (default): every pair of one rank count, then the next's; interleaved: "
        "round by round",
    )
    p.add_argument(
        "--settle",
        type=int,
        default=1,
        help="discarded runs whenever the rank count changes (and first); default 1",
    )
    args = p.parse_args()
    if args.bare:
        bare(args)
        return
    if args.pairs < 1 or args.epochs <= args.warmup_epochs or args.settle < 0:
        p.error("need --pairs >= 1, --epochs > --warmup-epochs and --settle >= 0")
    groups = [[("bare", np), ("harness", np)] for np in RANKS]
    started, load0 = time.monotonic(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="hpcscale-bench-") as tmp:
        runs = Paired(
            groups,
            args.pairs,
            lambda k, n: measure(k, n, args, Path(tmp)),
            args.warmup_epochs,
            blocked=args.schedule == "blocked",
            settle=args.settle,
        )

    result: dict[str, object] = {
        "bench": "torch_harness_overhead",
        "model": f"dcgan {args.image_size}px width {args.width} batch/rank {args.batch}",
        "launcher": "mpirun",
        "backend": "gloo",
        "estimator": "median over pairs of harness/bare (per-run median epoch), order-stat CI",
        "pairs": args.pairs,
        "epochs_per_run": args.epochs,
        "warmup_epochs": args.warmup_epochs,
        "steps_per_epoch": args.steps,
        "schedule": args.schedule,
        "settle_runs": len(runs.settled),
    }
    walls, cpus = [], []
    for np in RANKS:
        wall, cpu = runs.compare(("harness", np), ("bare", np))
        walls.append(wall)
        cpus.append(cpu)
        result[f"np{np}_bare_ips"] = runs.typical(("bare", np))
        result[f"np{np}_harness_ips"] = runs.typical(("harness", np))
        result.update(fields(f"np{np}_", wall, cpu))
        if args.pairs >= 2:  # both orders: the crossover reading, beside the median (no verdict)
            ratio, effect = crossover(runs.ratios(("harness", np), ("bare", np)))
            result[f"np{np}_crossover_ratio"] = round(ratio, 4)
            result[f"np{np}_order_effect"] = round(effect, 4)
    result.update(lost(walls, TARGET_PCT))
    cpu_lost = lost(cpus, TARGET_PCT)
    result["max_cpu_lost_pct"] = cpu_lost["max_lost_pct"]
    result["max_cpu_lost_ci_high_pct"] = cpu_lost["max_lost_ci_high_pct"]
    result["run_s_median"] = round(median(runs.run_s), 1)
    result["loadavg_start_end"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
