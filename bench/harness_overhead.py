"""What the harness costs: images/s of a bare TF2 + Horovod DCGAN loop (written plainly below) vs
the same networks through jobs/tf/train.py, at 1 and 2 ranks, and what turning the Horovod timeline
on costs at 2 ranks.

Estimator (bench/overhead_stats.py, shared with bench/torch_harness_overhead.py): each round
runs the configurations of one rank count back to back (np1: bare, harness; np2: bare, harness,
timeline), in reverse order every other round so a drift of the machine hits all alike; each run
counts as the median of its epochs after the warm-up epoch; a ratio (`npN_ratio` harness / bare,
`timeline_ratio` timeline / harness) is the median over rounds of the per-round ratios, with a
distribution-free 95 % confidence interval (`npN_ci`: order statistics of the ratios,
binomial), the same for CPU time (`npN_cpu_ratio`, images per second of rank 0's process CPU
time). `max_lost_pct` is 1 - the worst rank count's median ratio, in %, and
`max_lost_ci_high_pct` the upper bound of that loss. Ends with ONE JSON line.

    python bench/harness_overhead.py [--pairs 10] [--epochs 6] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from overhead_stats import Paired, fields, lost, median

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "jobs" / "tf" / "train.py"
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root"]


def bare(args: argparse.Namespace) -> None:
    """The loop a user writes by hand: same networks, optimizers, data shape and step."""
    sys.path.insert(0, str(REPO))
    import horovod.tensorflow as hvd
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    hvd.init()
    tf.random.set_seed(42 + hvd.rank())
    from jobs.tf.train import config_from_args

    with tempfile.TemporaryDirectory() as unused_run_dir:
        cfg = config_from_args(
            [
                "--model",
                "dcgan",
                "--run-dir",
                unused_run_dir,
                "--image-size",
                str(args.image_size),
                "--width",
                str(args.width),
            ]
        )
    from jobs.tf.models.gan_parts import critic, generator

    g = generator(cfg, norm=tf.keras.layers.BatchNormalization)
    d = critic(cfg, "discriminator", norm=tf.keras.layers.BatchNormalization)
    g_opt = tf.keras.optimizers.Adam(2e-4 * hvd.size(), beta_1=0.5)
    d_opt = tf.keras.optimizers.Adam(2e-4 * hvd.size(), beta_1=0.5)
    px, b = args.image_size, args.batch
    images = tf.random.uniform([4, b, px, px, 3], -1.0, 1.0)
    data = iter(tf.data.Dataset.from_tensor_slices(images).repeat().prefetch(2))

    def bce(logits: tf.Tensor, target: float) -> tf.Tensor:
        labels = tf.fill(tf.shape(logits), target)
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, logits))

    @tf.function
    def step(real: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        noise = tf.random.normal([b, cfg.latent_dim])
        with tf.GradientTape() as gt, tf.GradientTape() as dt:
            fake = g(noise, training=True)
            real_out, fake_out = d(real, training=True), d(fake, training=True)
            d_loss = bce(real_out, 1.0) + bce(fake_out, 0.0)
            g_loss = bce(fake_out, 1.0)
        dt, gt = hvd.DistributedGradientTape(dt), hvd.DistributedGradientTape(gt)
        d_grads = dt.gradient(d_loss, d.trainable_variables)
        g_grads = gt.gradient(g_loss, g.trainable_variables)
        d_opt.apply_gradients(zip(d_grads, d.trainable_variables, strict=True))
        g_opt.apply_gradients(zip(g_grads, g.trainable_variables, strict=True))
        return d_loss, g_loss

    step(next(data))  # first step builds slots; then sync everything from rank 0
    hvd.broadcast_variables(g.variables + d.variables, root_rank=0)
    hvd.broadcast_variables(g_opt.variables + d_opt.variables, root_rank=0)
    times, cpus = [], []
    for _ in range(args.epochs):
        t0, c0 = time.monotonic(), time.process_time()
        losses = [step(next(data)) for _ in range(args.steps)]
        times.append(time.monotonic() - t0)
        cpus.append(time.process_time() - c0)
        del losses
    if hvd.rank() == 0:
        print("BARE " + json.dumps({"time": times, "cpu": cpus}), flush=True)


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
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
    if kind == "bare":
        cmd = [*MPIRUN, "-np", str(np), sys.executable, __file__, "--bare", "--batch",
               str(args.batch), "--steps", str(args.steps), *common, *sizes]  # fmt: skip
        out = _run(cmd).stdout
        line = next(x for x in out.splitlines() if x.startswith("BARE "))
        clocks = json.loads(line[5:])
        return [images / t for t in clocks["time"]], [images / c for c in clocks["cpu"]]
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    cmd = [*MPIRUN, "-np", str(np), sys.executable, str(TRAIN), "--model", "dcgan", "--run-dir",
           str(run_dir), "--batch-per-rank", str(args.batch), "--steps-per-epoch",
           str(args.steps), *common, *sizes]  # fmt: skip
    if kind == "timeline":
        cmd.append("--timeline")
    _run(cmd)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return metrics["images_per_s"], [images / c for c in metrics["epoch_cpu_s"]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bare", action="store_true", help="internal: run the bare loop (one rank)")
    p.add_argument("--pairs", type=int, default=10, help="rounds of paired runs per rank count")
    p.add_argument("--epochs", type=int, default=6, help="per run, warm-up included")
    p.add_argument("--warmup-epochs", type=int, default=1, help="per run, left out")
    p.add_argument("--steps", type=int, default=10, help="per epoch")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    if args.bare:
        bare(args)
        return
    if args.pairs < 1 or args.epochs <= args.warmup_epochs:
        p.error("need --pairs >= 1 and --epochs > --warmup-epochs")
    groups = [[("bare", 1), ("harness", 1)], [("bare", 2), ("harness", 2), ("timeline", 2)]]
    started, load0 = time.monotonic(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="hpcscale-bench-") as tmp:
        runs = Paired(
            groups, args.pairs, lambda k, n: measure(k, n, args, Path(tmp)), args.warmup_epochs
        )

    result: dict[str, object] = {
        "bench": "harness_overhead",
        "model": f"dcgan {args.image_size}px width {args.width} batch/rank {args.batch}",
        "estimator": "median over rounds of harness/bare (per-run median epoch), order-stat CI",
        "pairs": args.pairs,
        "epochs_per_run": args.epochs,
        "warmup_epochs": args.warmup_epochs,
        "steps_per_epoch": args.steps,
    }
    walls = []
    for np in (1, 2):
        wall, cpu = runs.compare(("harness", np), ("bare", np))
        walls.append(wall)
        result[f"np{np}_bare_ips"] = runs.typical(("bare", np))
        result[f"np{np}_harness_ips"] = runs.typical(("harness", np))
        result.update(fields(f"np{np}_", wall, cpu))
    result["np2_timeline_ips"] = runs.typical(("timeline", 2))
    result.update(fields("timeline_", *runs.compare(("timeline", 2), ("harness", 2))))
    result.update(lost(walls, 3.0))
    result["run_s_median"] = round(median(runs.run_s), 1)
    result["loadavg_start_end"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
