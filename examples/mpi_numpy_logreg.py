"""A data-parallel logistic regression in mpi4py + NumPy: a user's own program, not TensorFlow.

Each rank trains on its shard of the data; gradients are averaged with MPI Allreduce every step
(what Horovod does for a deep network). `hpcscale.probe` writes the MLLOG lines that
`metrics: mllog` reads, so hpcscale times it and draws its learning curve with no other change.

    mpirun -np 2 python examples/mpi_numpy_logreg.py --batch-size 64 --epochs 3 --lr 0.05
    python examples/mpi_numpy_logreg.py --data data.npz   # arrays x (n, d) and y (n,) in {0, 1}
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

from hpcscale import probe


def load(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """The data set: a .npz file of `x` and `y`, or a seeded synthetic one (two Gaussians)."""
    if args.data:
        with np.load(args.data) as f:
            return f["x"].astype(np.float64), f["y"].astype(np.float64)
    rng = np.random.default_rng(args.seed)
    y = rng.integers(0, 2, args.samples).astype(np.float64)
    centre = np.where(y[:, None] == 1.0, 0.06, -0.06)  # overlapping: accuracy grows slowly
    x = centre + rng.normal(size=(args.samples, args.features))
    return x, y


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=64, help="per-rank batch")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.05, help="at the global batch of one rank")
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--val-split", type=float, default=0.2)
    ap.add_argument("--data", help=".npz with arrays x and y (default: synthetic)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.batch_size < 1 or args.epochs < 1:
        ap.error("--batch-size and --epochs must be at least 1")

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    x, y = load(args)
    n_val = int(len(y) * args.val_split)
    x_val, y_val, x_tr, y_tr = x[:n_val], y[:n_val], x[n_val:], y[n_val:]
    shard = slice(rank, None, size)  # disjoint shards, one per rank
    xs, ys = x_tr[shard], y_tr[shard]
    steps = len(ys) // args.batch_size
    steps = comm.allreduce(steps, op=MPI.MIN)  # every rank takes the same number of steps
    if steps == 0:
        print(f"error: shard of {len(ys)} samples < batch {args.batch_size}", file=sys.stderr)
        return 2
    w = np.zeros(x.shape[1])
    b = 0.0
    grad = np.empty(x.shape[1] + 1)
    lr = args.lr * size  # linear scaling with the global batch
    rng = np.random.default_rng(args.seed + rank)
    for epoch in range(args.epochs):
        order = rng.permutation(len(ys))
        loss_sum = 0.0
        with probe.epoch(epoch, samples=steps * args.batch_size * size):
            for s in range(steps):
                with probe.step():
                    idx = order[s * args.batch_size : (s + 1) * args.batch_size]
                    xb, yb = xs[idx], ys[idx]
                    z = xb @ w + b
                    p = 1.0 / (1.0 + np.exp(-z))
                    local = np.concatenate([xb.T @ (p - yb), [np.sum(p - yb)]]) / len(yb)
                    comm.Allreduce(local, grad, op=MPI.SUM)
                    grad /= size
                    w -= lr * grad[:-1]
                    b -= lr * grad[-1]
                    loss_sum += float(np.mean(np.logaddexp(0.0, z) - yb * z))
        train_loss = comm.allreduce(loss_sum / steps, op=MPI.SUM) / size
        val_acc = float(np.mean(((x_val @ w + b) > 0) == (y_val == 1.0))) if n_val else float("nan")
        probe.log(epoch, train_loss=train_loss, val_accuracy=val_acc)
        if rank == 0:
            print(f"epoch {epoch}: train_loss={train_loss:.4f} val_acc={val_acc:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
