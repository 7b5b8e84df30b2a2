"""SNGAN (Miyato et al. 2018): spectral normalisation on every weight layer of G and D instead of
batch norm, the deeper discriminator (a 3x3 conv before each strided conv), hinge loss.

Keras' SpectralNormalization (like tfa's before it) keeps a power-iteration vector `u` per layer
and rewrites the kernel in the forward pass; both depend only on the (identical) weights, so ranks
stay in step. Real and fake images go through D as one batch: one normalisation per step, and no
batch statistics to mix since there is no batch norm."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from jobs.tf.compat import KERAS3
from jobs.tf.config import JobConfig
from jobs.tf.distribute import DistContext
from jobs.tf.models.gan_parts import critic, generator
from jobs.tf.samples import noise_samples
from jobs.tf.workload import Workload

DEFAULT_LR = 2e-4


class GraphSafeSpectralNormalization(tf.keras.layers.SpectralNormalization):
    """Keras 2.15's `normalize_weights` tests a tensor with a Python `if` (skip all-zero kernels)
    and so fails inside tf.function; the same update without that test (a randomly initialised
    kernel is never all zeros). Keras 3's layer is graph-safe and used as is."""

    def normalize_weights(self) -> None:
        weights = tf.reshape(self.kernel, [-1, self.kernel_shape[-1]])
        vector_u = self.vector_u
        for _ in range(self.power_iterations):
            vector_v = tf.math.l2_normalize(tf.matmul(vector_u, weights, transpose_b=True))
            vector_u = tf.math.l2_normalize(tf.matmul(vector_v, weights))
        vector_u = tf.stop_gradient(vector_u)
        vector_v = tf.stop_gradient(vector_v)
        sigma = tf.matmul(tf.matmul(vector_v, weights), vector_u, transpose_b=True)
        self.vector_u.assign(tf.cast(vector_u, self.vector_u.dtype))
        self.kernel.assign(
            tf.cast(tf.reshape(self.kernel / sigma, self.kernel_shape), self.kernel.dtype)
        )


SpectralNorm = tf.keras.layers.SpectralNormalization if KERAS3 else GraphSafeSpectralNormalization


def sn(layer: tf.keras.layers.Layer) -> tf.keras.layers.Layer:
    return SpectralNorm(layer, power_iterations=1)


def build(cfg: JobConfig, ctx: DistContext) -> Workload:
    g = generator(cfg, norm=None, wrap=sn)
    d = critic(cfg, "discriminator", norm=None, wrap=sn, extra_conv=True)
    lr = cfg.lr if cfg.lr is not None else DEFAULT_LR
    g_opt = ctx.optimizer("adam", lr, beta_1=0.5, beta_2=0.999)
    d_opt = ctx.optimizer("adam", lr, beta_1=0.5, beta_2=0.999)

    def train_step(real: tf.Tensor) -> dict[str, Any]:
        b = tf.shape(real)[0]
        noise = tf.random.normal([b, cfg.latent_dim])
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = g(noise, training=True)
            out = d(tf.concat([real, tf.cast(fake, real.dtype)], axis=0), training=True)
            real_out, fake_out = out[:b, 0], out[b:, 0]
            d_per = tf.nn.relu(1.0 - real_out) + tf.nn.relu(1.0 + fake_out)
            g_per = -fake_out
            d_loss, g_loss = ctx.loss(d_per), ctx.loss(g_per)
        d_grads = ctx.gradients(d_tape, d_loss, d.trainable_variables, d_opt)
        g_grads = ctx.gradients(g_tape, g_loss, g.trainable_variables, g_opt)
        ctx.apply(d_opt, d_grads, d.trainable_variables)
        ctx.apply(g_opt, g_grads, g.trainable_variables)
        return {"d_loss": ctx.mean(d_per), "g_loss": ctx.mean(g_per)}

    samples = noise_samples(g, cfg.seed, cfg.latent_dim)
    return Workload([g, d], {"generator": g_opt, "discriminator": d_opt}, train_step, samples)
