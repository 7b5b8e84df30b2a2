"""StackGAN's networks (Zhang et al. 2017, as in seed 000): conditioning augmentation, the
Stage-I and Stage-II generators and their matching-aware discriminators.

Geometry (all from arguments, so tests run it small): Stage-I draws s1 = --image-size px with
`gan_upsamplings(s1)` nearest-upsample + 3x3 conv blocks from s1/2^n (4x4 at 64 px), widths
8w..w (w = --width); Stage-II encodes the Stage-I image down to s1/4, joins the conditioning,
runs RESIDUAL_BLOCKS residual blocks and upsamples 2 + log2(f) times to s2 = f * s1
(f = --stage2-factor: 64 -> 256 px by default). Each discriminator reduces its image by stride-2
4x4 convs to the generator's starting size, compresses the text embedding to --condition-dim,
tiles it over that grid and judges the pair (real image + its text vs. fake, and vs. real image +
mismatched text).
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from jobs.tf.config import JobConfig, gan_upsamplings

layers = tf.keras.layers
RESIDUAL_BLOCKS = 2
MAX_WIDTH_FACTOR = 16  # discriminator widths stop growing at 16w
EMBEDDING_POOL = 64  # synthetic text: seeded embeddings each image draws from
EMBEDDING_SEED = 1_612_03242  # mixed with --seed (arXiv 1612.03242)


def synthetic_embeddings(cfg: JobConfig, count: int = EMBEDDING_POOL) -> np.ndarray:
    """Seeded stand-in "caption embeddings", the same on every rank."""
    rng = np.random.default_rng([EMBEDDING_SEED, cfg.seed, cfg.embedding_dim])
    return rng.standard_normal((count, cfg.embedding_dim)).astype(np.float32)


def kl_per_example(mu: tf.Tensor, logvar: tf.Tensor) -> tf.Tensor:
    """KL(N(mu, sigma^2) || N(0, I)) per example: the conditioning augmentation's regulariser."""
    mu, logvar = tf.cast(mu, tf.float32), tf.cast(logvar, tf.float32)
    return 0.5 * tf.reduce_sum(tf.square(mu) + tf.exp(logvar) - 1.0 - logvar, axis=-1)


def _conditioning(emb: tf.Tensor, eps: tf.Tensor, dim: int) -> tuple[tf.Tensor, ...]:
    """Conditioning augmentation: embedding -> (mu, log sigma^2) -> c = mu + sigma * eps."""
    x = layers.Dense(2 * dim)(emb)
    x = layers.LeakyReLU(0.2)(x)
    mu, logvar = layers.Lambda(lambda t: tf.split(t, 2, axis=-1))(x)
    c = layers.Lambda(lambda a: a[0] + tf.exp(0.5 * a[1]) * tf.cast(a[2], a[0].dtype))(
        [mu, logvar, eps]
    )
    return c, _float32(mu), _float32(logvar)


def _float32(x: tf.Tensor) -> tf.Tensor:
    """An output in float32 whatever the mixed-precision policy (the KL term is summed)."""
    return layers.Activation("linear", dtype="float32")(x)


def _up(x: tf.Tensor, ch: int) -> tf.Tensor:
    x = layers.UpSampling2D(2)(x)
    x = layers.Conv2D(ch, 3, 1, "same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    return layers.ReLU()(x)


def _to_image(x: tf.Tensor) -> tf.Tensor:
    x = layers.Conv2D(3, 3, 1, "same")(x)
    return layers.Activation("tanh", dtype="float32")(x)


def _inputs(cfg: JobConfig) -> tuple[tf.Tensor, tf.Tensor]:
    return layers.Input((cfg.embedding_dim,)), layers.Input((cfg.condition_dim,))


def stage1_generator(cfg: JobConfig, name: str) -> tf.keras.Model:
    """[embedding, z, eps] -> [image (s1 px), mu, logvar]."""
    n = gan_upsamplings(cfg.image_size)
    s0 = cfg.image_size // 2**n
    ch = cfg.width * 2 ** (n - 1)
    emb, eps = _inputs(cfg)
    z = layers.Input((cfg.latent_dim,))
    c, mu, logvar = _conditioning(emb, eps, cfg.condition_dim)
    x = layers.Concatenate()([c, z])
    x = layers.Dense(s0 * s0 * ch * 2, use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.Reshape((s0, s0, ch * 2))(x)
    for _ in range(n):
        x = _up(x, ch)
        ch = max(ch // 2, 1)
    return tf.keras.Model([emb, z, eps], [_to_image(x), mu, logvar], name=name)


def _residual(x: tf.Tensor, ch: int) -> tf.Tensor:
    y = layers.Conv2D(ch, 3, 1, "same", use_bias=False)(x)
    y = layers.BatchNormalization()(y)
    y = layers.ReLU()(y)
    y = layers.Conv2D(ch, 3, 1, "same", use_bias=False)(y)
    y = layers.BatchNormalization()(y)
    return layers.ReLU()(layers.Add()([x, y]))


def _tile(vec: tf.Tensor, size: int) -> tf.Tensor:
    """(b, d) -> (b, size, size, d)."""
    x = layers.Reshape((1, 1, vec.shape[-1]))(vec)
    return layers.UpSampling2D(size)(x)


def stage2_generator(cfg: JobConfig) -> tf.keras.Model:
    """[Stage-I image (s1 px), embedding, eps] -> [image (f * s1 px), mu, logvar]."""
    s1 = cfg.image_size
    ch = cfg.width * 4
    img = layers.Input((s1, s1, 3))
    emb, eps = _inputs(cfg)
    c, mu, logvar = _conditioning(emb, eps, cfg.condition_dim)
    x = layers.Conv2D(cfg.width, 3, 1, "same")(img)
    x = layers.ReLU()(x)
    for k in (2, 4):
        x = layers.Conv2D(cfg.width * k, 4, 2, "same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
    x = layers.Concatenate()([x, _tile(c, s1 // 4)])
    x = layers.Conv2D(ch, 3, 1, "same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    for _ in range(RESIDUAL_BLOCKS):
        x = _residual(x, ch)
    for _ in range(2 + int(math.log2(cfg.stage2_factor))):
        ch = max(ch // 2, 4)
        x = _up(x, ch)
    return tf.keras.Model([img, emb, eps], [_to_image(x), mu, logvar], name="generator")


def discriminator(cfg: JobConfig, image_size: int, name: str) -> tf.keras.Model:
    """[image, embedding] -> one logit: stride-2 convs down to s1/2^n, the compressed embedding
    tiled and joined, a 1x1 conv, then one dense logit."""
    downs = gan_upsamplings(cfg.image_size) + int(math.log2(image_size // cfg.image_size))
    img = layers.Input((image_size, image_size, 3))
    emb = layers.Input((cfg.embedding_dim,))
    x = img
    for i in range(downs):
        ch = cfg.width * min(2**i, MAX_WIDTH_FACTOR)
        x = layers.Conv2D(ch, 4, 2, "same", use_bias=i == 0)(x)
        if i > 0:
            x = layers.BatchNormalization()(x)
        x = layers.LeakyReLU(0.2)(x)
    cond = layers.LeakyReLU(0.2)(layers.Dense(cfg.condition_dim)(emb))
    x = layers.Concatenate()([x, _tile(cond, x.shape[1])])
    x = layers.Conv2D(x.shape[-1] - cfg.condition_dim, 1, 1, "same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.LeakyReLU(0.2)(x)
    out = layers.Dense(1, dtype="float32")(layers.Flatten()(x))
    return tf.keras.Model([img, emb], out, name=name)
