"""StackGAN (Zhang et al. 2017) as seed 000 trained it: text embedding -> conditioning
augmentation -> Stage-I image (--stage 1), or a frozen Stage-I generator's image refined by
Stage-II (--stage 2); networks in stackgan_parts.py.

Losses (per example, reduced by the distribution context): the matching-aware discriminator
d = BCE(D(real, text), 1) + (BCE(D(fake, text), 0) + BCE(D(real, wrong text), 0)) / 2, the
wrong text being the batch's embeddings rolled by one; the generator g = BCE(D(fake, text), 1) +
--kl-weight x KL (the conditioning augmentation's). Reported: d_loss, g_loss, kl_loss.

Inputs: (image, embedding) pairs from `--dataset cub`; with images alone (synthetic, folder,
flat) each image draws an embedding from a seeded pool of --embedding-dim vectors (a gather, free
per step). Stage 2 wants f x s1 px images: smaller ones are resized in the step (bilinear).

Stage 2 starts from `--stage1-weights` (the `stage1_generator.weights.h5` a stage-1 run writes
in its run directory), or, without it, first trains Stage-I for --stage1-steps untimed steps
(default: as many as the timed run, epochs x steps per epoch) on the same inputs. Either way the
run directory gets `stage1.json` recording it (weights file, steps, images, seconds, losses).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from hpcscale.formats.atomic import atomic_write
from jobs.tf.config import JobConfig, JobUsageError
from jobs.tf.distribute import DistContext
from jobs.tf.models.dcgan import bce
from jobs.tf.models.stackgan_parts import (
    discriminator,
    kl_per_example,
    stage1_generator,
    stage2_generator,
    synthetic_embeddings,
)
from jobs.tf.samples import COLS, ROWS, fixed_noise
from jobs.tf.workload import Workload

DEFAULT_LR = 2e-4
STAGE1_WEIGHTS = "stage1_generator.weights.h5"
STAGE1_RECORD = "stage1.json"
Step = Callable[[Any], dict[str, Any]]


def build(cfg: JobConfig, ctx: DistContext) -> Workload:
    lr = cfg.lr if cfg.lr is not None else DEFAULT_LR
    pool = tf.constant(synthetic_embeddings(cfg))
    if cfg.stage == 1:
        g = stage1_generator(cfg, "generator")
        d = discriminator(cfg, cfg.image_size, "discriminator")
        g_opt, d_opt = ctx.optimizer("adam", lr, beta_1=0.5), ctx.optimizer("adam", lr, beta_1=0.5)
        step = stage1_step(cfg, ctx, (g, d, g_opt, d_opt), pool)
        opts = {"generator": g_opt, "discriminator": d_opt}
        return Workload(
            [g, d], opts, step, _samples(cfg, g), save=lambda run_dir: _save(g, run_dir)
        )
    g1 = stage1_generator(cfg, "stage1_generator")
    g2 = stage2_generator(cfg)
    d2 = discriminator(cfg, cfg.image_size * cfg.stage2_factor, "discriminator")
    g_opt, d_opt = ctx.optimizer("adam", lr, beta_1=0.5), ctx.optimizer("adam", lr, beta_1=0.5)
    pretrain = None
    if cfg.stage1_weights is not None:
        _load(g1, cfg)
        g1.trainable = False
        if ctx.rank == 0:
            _record(cfg, {"stage1_weights": str(cfg.stage1_weights), "steps": 0})
    else:
        pretrain = _pretrainer(cfg, ctx, g1, lr, pool)
    step = stage2_step(cfg, ctx, g1, (g2, d2, g_opt, d_opt), pool)
    opts = {"generator": g_opt, "discriminator": d_opt}
    return Workload([g1, g2, d2], opts, step, _samples(cfg, g1, g2), pretrain=pretrain)


def _inputs(cfg: JobConfig, batch: Any, pool: tf.Tensor, size: int) -> tuple[tf.Tensor, ...]:
    """(images at `size` px, embeddings): a cub pair, or images with pool embeddings."""
    if isinstance(batch, (tuple, list)):
        real, emb = batch
    else:
        real = batch
        idx = tf.random.uniform([tf.shape(real)[0]], 0, pool.shape[0], dtype=tf.int32)
        emb = tf.gather(pool, idx)
    if real.shape[1] != size:
        real = tf.image.resize(real, (size, size))
    return real, emb


def _losses(
    cfg: JobConfig, d: tf.keras.Model, real: tf.Tensor, fake: tf.Tensor, emb: tf.Tensor, kl: Any
) -> tuple[tf.Tensor, tf.Tensor]:
    """Per-example (discriminator, generator) losses, matching-aware (see the module)."""
    wrong = tf.roll(emb, 1, axis=0)
    real_out = d([real, emb], training=True)
    wrong_out = d([real, wrong], training=True)
    fake_out = d([fake, emb], training=True)
    d_per = bce(real_out, 1.0) + 0.5 * (bce(fake_out, 0.0) + bce(wrong_out, 0.0))
    g_per = bce(fake_out, 1.0) + cfg.kl_weight * kl
    return d_per, g_per


def _update(ctx: DistContext, nets: tuple, tapes: tuple, losses: tuple) -> None:
    g, d, g_opt, d_opt = nets
    g_tape, d_tape = tapes
    d_loss, g_loss = losses
    d_grads = ctx.gradients(d_tape, d_loss, d.trainable_variables, d_opt)
    g_grads = ctx.gradients(g_tape, g_loss, g.trainable_variables, g_opt)
    ctx.apply(d_opt, d_grads, d.trainable_variables)
    ctx.apply(g_opt, g_grads, g.trainable_variables)


def _noise(cfg: JobConfig, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.random.normal([b, cfg.latent_dim]), tf.random.normal([b, cfg.condition_dim])


def _gan_update(
    cfg: JobConfig,
    ctx: DistContext,
    nets: tuple,
    real: tf.Tensor,
    emb: tf.Tensor,
    generate: Callable[[], tuple[tf.Tensor, tf.Tensor, tf.Tensor]],
) -> dict[str, Any]:
    """One update of D then G, both stages: `generate` draws (image, mu, logvar) under the
    tapes, so only what feeds the generator differs between the stages."""
    d = nets[1]
    with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
        fake, mu, logvar = generate()
        kl = kl_per_example(mu, logvar)
        d_per, g_per = _losses(cfg, d, real, fake, emb, kl)
        losses = ctx.loss(d_per), ctx.loss(g_per)
    _update(ctx, nets, (g_tape, d_tape), losses)
    return {"d_loss": ctx.mean(d_per), "g_loss": ctx.mean(g_per), "kl_loss": ctx.mean(kl)}


def stage1_step(cfg: JobConfig, ctx: DistContext, nets: tuple, pool: tf.Tensor) -> Step:
    """One Stage-I update of D then G; `nets` = (generator, discriminator, their optimizers)."""
    g = nets[0]

    def train_step(batch: Any) -> dict[str, Any]:
        real, emb = _inputs(cfg, batch, pool, cfg.image_size)
        z, eps = _noise(cfg, tf.shape(real)[0])
        return _gan_update(cfg, ctx, nets, real, emb, lambda: g([emb, z, eps], training=True))

    return train_step


def stage2_step(
    cfg: JobConfig, ctx: DistContext, g1: tf.keras.Model, nets: tuple, pool: tf.Tensor
) -> Step:
    """One Stage-II update: the frozen Stage-I generator draws, Stage-II refines."""
    g = nets[0]
    size = cfg.image_size * cfg.stage2_factor

    def train_step(batch: Any) -> dict[str, Any]:
        real, emb = _inputs(cfg, batch, pool, size)
        b = tf.shape(real)[0]
        z, eps1 = _noise(cfg, b)
        low, _, _ = g1([emb, z, eps1], training=False)
        eps2 = tf.random.normal([b, cfg.condition_dim])
        return _gan_update(cfg, ctx, nets, real, emb, lambda: g([low, emb, eps2], training=True))

    return train_step


def _pretrainer(
    cfg: JobConfig, ctx: DistContext, g1: tf.keras.Model, lr: float, pool: tf.Tensor
) -> Callable[[Iterator[Any]], None]:
    """Stage 2 without --stage1-weights: train Stage-I first, untimed, on the same inputs."""
    d1 = discriminator(cfg, cfg.image_size, "stage1_discriminator")
    g_opt, d_opt = ctx.optimizer("adam", lr, beta_1=0.5), ctx.optimizer("adam", lr, beta_1=0.5)

    def pretrain(batches: Iterator[Any]) -> None:
        ctx.prepare([g1, d1], {"stage1_generator": g_opt, "stage1_discriminator": d_opt})
        step = ctx.compile_step(stage1_step(cfg, ctx, (g1, d1, g_opt, d_opt), pool))
        steps = cfg.stage1_steps or cfg.epochs * ctx.steps_per_epoch
        sums: dict[str, float] = {}
        t0 = time.monotonic()
        for _ in range(steps):
            for k, v in ctx.step_values(step(next(batches))).items():
                sums[k] = sums.get(k, 0.0) + v
        elapsed = time.monotonic() - t0
        ctx.sync_local_state([g1, d1])
        g1.trainable = False
        if ctx.rank == 0:
            losses = {k: v / steps for k, v in sorted(sums.items())}
            print(f"[hpcscale] stage 1 pretrained: steps={steps} time_s={elapsed:.3f}", flush=True)
            images = steps * ctx.global_batch
            _record(cfg, {"stage1_weights": None, "steps": steps, "images": images,
                          "time_s": elapsed, "losses": losses})  # fmt: skip

    return pretrain


def _record(cfg: JobConfig, record: dict[str, Any]) -> None:
    atomic_write(cfg.run_dir / STAGE1_RECORD, json.dumps(record, indent=1) + "\n")


def _load(g1: tf.keras.Model, cfg: JobConfig) -> None:
    path = Path(cfg.stage1_weights or "")
    if not path.is_file():
        raise JobUsageError(f"--stage1-weights {path}: no such file (a stage-1 run writes "
                            f"{STAGE1_WEIGHTS} in its run directory)")  # fmt: skip
    try:
        g1.load_weights(str(path))
    except (ValueError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise JobUsageError(
            f"--stage1-weights {path}: does not fit a Stage-I generator of --image-size "
            f"{cfg.image_size}, --width {cfg.width}, --embedding-dim {cfg.embedding_dim}, "
            f"--condition-dim {cfg.condition_dim}, --latent-dim {cfg.latent_dim} ({first})"
        ) from None


def _save(g: tf.keras.Model, run_dir: Path) -> None:
    """The Stage-I generator's weights, for stage-2 runs (written beside, then renamed)."""
    final = Path(run_dir) / STAGE1_WEIGHTS
    tmp = final.with_name(f".{os.getpid()}.{final.name}")  # Keras: the suffix picks the format
    g.save_weights(str(tmp))
    os.replace(tmp, final)


def _fixed_text(cfg: JobConfig) -> np.ndarray:
    """ROWS embeddings, each repeated over a row: the cub data's, else the synthetic pool's."""
    if getattr(cfg, "dataset", None) == "cub":
        from jobs.tf.datasets.cub import fixed_embeddings

        rows = fixed_embeddings(cfg, ROWS)
    else:
        rows = synthetic_embeddings(cfg)[:ROWS]
    return np.repeat(rows, COLS, axis=0)


def _samples(
    cfg: JobConfig, g1: tf.keras.Model, g2: Optional[tf.keras.Model] = None
) -> Callable[[], dict[str, Any]]:
    """Grids from fixed text (one embedding per row), noise (one per column) and the
    conditioning's mean (eps = 0); stage 2 also returns its Stage-I images as "stage1". The
    inputs are made on the first call (rank 0 only: other ranks never read the text again)."""
    fixed: list[tf.Tensor] = []

    def samples() -> dict[str, Any]:
        if not fixed:
            z = np.tile(fixed_noise(cfg.seed, cfg.latent_dim, COLS), (ROWS, 1))
            eps = np.zeros([ROWS * COLS, cfg.condition_dim], np.float32)
            fixed.extend(tf.constant(x) for x in (_fixed_text(cfg), z, eps))
        emb, z, eps = fixed
        low = g1([emb, z, eps], training=False)[0]
        if g2 is None:
            return {"": low.numpy()}
        high = g2([low, emb, eps], training=False)[0]
        return {"": high.numpy(), "stage1": low.numpy()}

    return samples
