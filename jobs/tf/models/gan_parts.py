"""Layer stacks the three GANs share: DCGAN-shaped generator and strided-conv critic bodies.

Geometry: `gan_upsamplings(px)` stride-2 layers (3 below 64 px, 4 from 64 px), so a 64 px
generator grows 4x4 -> 64x64 with widths 8w, 4w, 2w, w, 3 (w = --width, 64 as in the DCGAN
paper: about 3.6 M generator and 2.8 M discriminator parameters).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import tensorflow as tf

from jobs.tf.config import JobConfig, gan_upsamplings

layers = tf.keras.layers
Wrap = Callable[[layers.Layer], layers.Layer]


def identity(layer: layers.Layer) -> layers.Layer:
    return layer


def generator(
    cfg: JobConfig, norm: Optional[Callable[[], layers.Layer]], wrap: Wrap = identity
) -> tf.keras.Model:
    """z -> image in [-1, 1]. `norm` builds the layer after each hidden (de)conv (None: none);
    `wrap` wraps each weight layer (spectral normalisation for SNGAN)."""
    n = gan_upsamplings(cfg.image_size)
    s0 = cfg.image_size // 2**n
    ch = cfg.width * 2 ** (n - 1)
    z = layers.Input((cfg.latent_dim,))
    x = wrap(layers.Dense(s0 * s0 * ch, use_bias=norm is None))(z)
    x = layers.Reshape((s0, s0, ch))(x)
    for _ in range(n - 1):
        if norm is not None:
            x = norm()(x)
        x = layers.ReLU()(x)
        ch //= 2
        x = wrap(layers.Conv2DTranspose(ch, 4, 2, "same", use_bias=norm is None))(x)
    if norm is not None:
        x = norm()(x)
    x = layers.ReLU()(x)
    x = wrap(layers.Conv2DTranspose(3, 4, 2, "same"))(x)
    out = layers.Activation("tanh", dtype="float32")(x)
    return tf.keras.Model(z, out, name="generator")


def critic(
    cfg: JobConfig,
    name: str,
    norm: Optional[Callable[[], layers.Layer]],
    wrap: Wrap = identity,
    extra_conv: bool = False,
) -> tf.keras.Model:
    """image -> one logit/score. Stride-2 4x4 convs w, 2w, 4w, ... with LeakyReLU(0.2), `norm`
    after all but the first; `extra_conv` adds a 3x3 stride-1 conv before each (SNGAN's deeper
    discriminator)."""
    n = gan_upsamplings(cfg.image_size)
    img = layers.Input((cfg.image_size, cfg.image_size, 3))
    x = img
    for i in range(n):
        ch = cfg.width * 2**i
        if extra_conv:
            x = wrap(layers.Conv2D(ch, 3, 1, "same"))(x)
            x = layers.LeakyReLU(0.2)(x)
        x = wrap(layers.Conv2D(ch, 4, 2, "same", use_bias=norm is None or i == 0))(x)
        if norm is not None and i > 0:
            x = norm()(x)
        x = layers.LeakyReLU(0.2)(x)
    x = layers.Flatten()(x)
    out = wrap(layers.Dense(1, dtype="float32"))(x)
    return tf.keras.Model(img, out, name=name)
