"""Sample grids: a GAN's images from fixed inputs, tiled into one PNG per epoch.

Rank 0 writes `samples/epoch_NNN.png` in the run directory at the end of each epoch (NNN 1-based,
zero-padded to 3), outside the timed steps; a workload may add named grids beside it (StackGAN
stage 2: `epoch_NNN_stage1.png`). The inputs are seeded, so grids compare across epochs and runs.
PNG through tf.io.encode_png (no image library), each file written atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from hpcscale.formats.atomic import atomic_write

ROWS, COLS = 4, 8  # 32 samples per grid
PAD = 2  # px of black between and around the tiles
NOISE_SEED = 20_210_421  # mixed with --seed: the same noise in every epoch of a run


def grid_size(image_size: int, rows: int = ROWS, cols: int = COLS) -> tuple[int, int]:
    """(height, width) in px of a grid of `rows` x `cols` square images."""
    return rows * (image_size + PAD) + PAD, cols * (image_size + PAD) + PAD


def fixed_noise(seed: int, dim: int, count: int = ROWS * COLS) -> np.ndarray:
    """`count` standard-normal vectors, the same for a given (seed, dim)."""
    rng = np.random.default_rng([NOISE_SEED, seed, dim])
    return rng.standard_normal((count, dim)).astype(np.float32)


def tile(images: Any, rows: int = ROWS, cols: int = COLS) -> np.ndarray:
    """images in [-1, 1], shape (rows*cols, h, w, 3) -> one uint8 grid, row-major."""
    arr = np.asarray(images, dtype=np.float32)
    n, h, w, c = arr.shape
    if n != rows * cols:
        raise ValueError(f"{n} images for a {rows}x{cols} grid")
    pixels = np.clip((arr + 1.0) * 127.5, 0, 255).round().astype(np.uint8)
    out = np.zeros((rows * (h + PAD) + PAD, cols * (w + PAD) + PAD, c), np.uint8)
    for i in range(n):
        r, k = divmod(i, cols)
        y, x = PAD + r * (h + PAD), PAD + k * (w + PAD)
        out[y : y + h, x : x + w] = pixels[i]
    return out


def sample_path(run_dir: Path, epoch: int, name: str = "") -> Path:
    """samples/epoch_NNN.png, or samples/epoch_NNN_<name>.png for a named extra grid."""
    suffix = f"_{name}" if name else ""
    return Path(run_dir) / "samples" / f"epoch_{epoch:03d}{suffix}.png"


def write_grids(run_dir: Path, epoch: int, grids: dict[str, Any]) -> list[Path]:
    """Write each named batch of images (name "" is the main grid) as one PNG; the paths."""
    written = []
    for name, images in grids.items():
        path = sample_path(run_dir, epoch, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        png = tf.io.encode_png(tile(images)).numpy()
        atomic_write(path, png)
        written.append(path)
    return written


def noise_samples(generator: Any, seed: int, latent_dim: int) -> Any:
    """The sampling hook of an unconditional GAN: its generator on a fixed noise, inference mode
    (batch-norm moving statistics; a local forward pass, no collective)."""
    noise = tf.constant(fixed_noise(seed, latent_dim))

    def samples() -> dict[str, Any]:
        return {"": generator(noise, training=False).numpy()}

    return samples
