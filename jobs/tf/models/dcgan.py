"""DCGAN (Radford et al. 2015): batch norm in G and D, non-saturating BCE loss, one D and one G
update per batch."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from jobs.tf.config import JobConfig
from jobs.tf.distribute import DistContext
from jobs.tf.models.gan_parts import critic, generator
from jobs.tf.samples import noise_samples
from jobs.tf.workload import Workload

DEFAULT_LR = 2e-4


def bce(logits: tf.Tensor, target: float) -> tf.Tensor:
    """Per-example sigmoid cross-entropy against a constant label."""
    labels = tf.fill(tf.shape(logits), target)
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, logits), axis=-1)


def build(cfg: JobConfig, ctx: DistContext) -> Workload:
    bn = tf.keras.layers.BatchNormalization
    g = generator(cfg, norm=bn)
    d = critic(cfg, "discriminator", norm=bn)
    lr = cfg.lr if cfg.lr is not None else DEFAULT_LR
    g_opt = ctx.optimizer("adam", lr, beta_1=0.5)
    d_opt = ctx.optimizer("adam", lr, beta_1=0.5)

    def train_step(real: tf.Tensor) -> dict[str, Any]:
        noise = tf.random.normal([tf.shape(real)[0], cfg.latent_dim])
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = g(noise, training=True)
            real_out = d(real, training=True)
            fake_out = d(fake, training=True)
            d_per = bce(real_out, 1.0) + bce(fake_out, 0.0)
            g_per = bce(fake_out, 1.0)
            d_loss, g_loss = ctx.loss(d_per), ctx.loss(g_per)
        d_grads = ctx.gradients(d_tape, d_loss, d.trainable_variables, d_opt)
        g_grads = ctx.gradients(g_tape, g_loss, g.trainable_variables, g_opt)
        ctx.apply(d_opt, d_grads, d.trainable_variables)
        ctx.apply(g_opt, g_grads, g.trainable_variables)
        return {"d_loss": ctx.mean(d_per), "g_loss": ctx.mean(g_per)}

    samples = noise_samples(g, cfg.seed, cfg.latent_dim)
    return Workload([g, d], {"generator": g_opt, "discriminator": d_opt}, train_step, samples)
