"""`cub`: StackGAN's CUB-200-2011 layout, (image, text embedding) pairs for `model: stackgan`.

Expected under --data-dir (the layout of StackGAN's own data preparation):

    CUB_200_2011/images/<class>/<name>.jpg   (002.Laysan_Albatross/Laysan_Albatross_0002_1027.jpg)
    train/filenames.pickle                    a pickled list of "<class>/<name>" (no suffix)
    train/char-CNN-RNN-embeddings.pickle      row i: image i's captions, images x captions x dim
                                              (float; a .npy of that array is read as well)

Each step pairs an image with one of its captions' embeddings, drawn at random (seeded by
--seed + rank). --images-per-class keeps a seeded choice of that many images per species (seed 000
kept 20 of ~60), --dataset-size then a seeded subset; the list is sharded by rank, decoded in
parallel and prefetched (jobs/tf/datasets/pipeline.py). Images are resized to --image-size, or to
--image-size x --stage2-factor for --stage 2. The pickles are trusted input (pickle runs code):
only point --data-dir at a copy you made. Python 2 pickles (StackGAN's) load as latin-1.
"""

from __future__ import annotations

import pickle
import random
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf

from jobs.tf.config import JobConfig, JobUsageError, steps_per_epoch
from jobs.tf.datasets.pipeline import check_size, decode, shard, train_batches
from jobs.tf.datasets.spec import DataSpec

IMAGES = Path("CUB_200_2011") / "images"
FILENAMES = Path("train") / "filenames.pickle"
EMBEDDINGS = (
    Path("train") / "char-CNN-RNN-embeddings.pickle",
    Path("train") / "char-CNN-RNN-embeddings.npy",
)


def _unpickle(path: Path) -> object:
    try:
        with path.open("rb") as f:
            return pickle.load(f, encoding="latin1")
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise JobUsageError(f"{path}: cannot read as a pickle ({exc})") from None


def load_filenames(root: Path) -> list[str]:
    path = root / FILENAMES
    if not path.is_file():
        raise JobUsageError(f"--dataset cub: missing {path} (a pickled list of '<class>/<name>')")
    names = _unpickle(path)
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise JobUsageError(f"{path}: expected a list of '<class>/<name>' strings")
    bad = next((n for n in names if "/" not in n), None)
    if bad is not None:
        raise JobUsageError(f"{path}: entry {bad!r} is not '<class>/<name>'")
    return list(names)


def load_embeddings(root: Path) -> tuple[np.ndarray, Path]:
    """images x captions x dim, float32 (a 2-d array is one caption per image)."""
    path = next((root / p for p in EMBEDDINGS if (root / p).is_file()), None)
    if path is None:
        wanted = " or ".join(str(root / p) for p in EMBEDDINGS)
        raise JobUsageError(f"--dataset cub: missing {wanted} (images x captions x dim)")
    try:
        raw = np.load(path) if path.suffix == ".npy" else _unpickle(path)
        arr = np.asarray(raw, dtype=np.float32)
    except (OSError, ValueError) as exc:
        raise JobUsageError(f"{path}: not a numeric array ({exc})") from None
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.ndim != 3:
        raise JobUsageError(f"{path}: shape {arr.shape}, expected images x captions x dim")
    return arr, path


def per_class(names: list[str], k: Optional[int], seed: int) -> list[int]:
    """Indices of a seeded choice of k images per class (all of a smaller class), in order."""
    if k is None:
        return list(range(len(names)))
    groups: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(names):
        groups[name.split("/", 1)[0]].append(i)
    rng = random.Random(seed)
    keep = [i for cls in sorted(groups) for i in rng.sample(groups[cls], min(k, len(groups[cls])))]
    return sorted(keep)


def read_cub(cfg: JobConfig) -> tuple[list[str], np.ndarray, list[str]]:
    """(image paths, their embeddings rows, names) after the per-class and size cuts, checked."""
    assert cfg.data_dir is not None
    root = Path(cfg.data_dir)
    names = load_filenames(root)
    emb, emb_path = load_embeddings(root)
    if len(emb) != len(names):
        raise JobUsageError(
            f"{emb_path}: {len(emb)} rows but {root / FILENAMES} lists {len(names)} images"
        )
    if emb.shape[2] != cfg.embedding_dim:
        raise JobUsageError(
            f"{emb_path}: embeddings of {emb.shape[2]} values, but --embedding-dim is "
            f"{cfg.embedding_dim}"
        )
    keep = per_class(names, cfg.images_per_class, cfg.seed)
    if cfg.dataset_size is not None and cfg.dataset_size < len(keep):
        keep = sorted(random.Random(cfg.seed).sample(keep, cfg.dataset_size))
    paths = [str(root / IMAGES / f"{names[i]}.jpg") for i in keep]
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise JobUsageError(
            f"--dataset cub: missing image {missing[0]} ({len(missing)} of the {len(paths)} "
            f"images listed in {root / FILENAMES})"
        )
    return paths, emb[keep], [names[i] for i in keep]


def make_cub(
    cfg: JobConfig, rank: int, shards: int, global_batch: int, process_batch: int
) -> DataSpec:
    if cfg.val_split or cfg.val_dir is not None:
        raise JobUsageError("--dataset cub has no validation split (--val-split, --val-dir)")
    paths, emb, names = read_cub(cfg)
    check_size(len(paths), global_batch, f"--data-dir {cfg.data_dir}")
    px = cfg.image_size * (cfg.stage2_factor if cfg.stage == 2 else 1)
    rows = shard(list(range(len(paths))), rank, shards)
    table = tf.constant(emb[rows])  # this rank's rows only
    captions = emb.shape[1]

    def load(path: tf.Tensor, row: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        pick = tf.random.uniform([], 0, captions, dtype=tf.int32, seed=cfg.seed + rank)
        return decode(tf.io.read_file(path), px), table[row, pick]

    mine = tf.data.Dataset.from_tensor_slices(
        (tf.constant([paths[i] for i in rows], tf.string), tf.range(len(rows)))
    )
    ds = train_batches(mine, len(rows), load, cfg, rank, process_batch)
    classes = len({n.split("/", 1)[0] for n in names})
    return DataSpec(
        ds,
        len(paths),
        steps_per_epoch(len(paths), global_batch, cfg.steps_per_epoch),
        f"cub {cfg.data_dir} ({len(paths)} images, {classes} classes, {captions} captions "
        f"each, {px} px)",
    )


def fixed_embeddings(cfg: JobConfig, count: int) -> np.ndarray:
    """`count` caption embeddings for sample grids: the first caption of images spread evenly
    over the (cut) list, the same in every epoch and run."""
    _, emb, _ = read_cub(cfg)
    picks = np.linspace(0, len(emb) - 1, count).round().astype(int)
    return emb[picks, 0, :]
