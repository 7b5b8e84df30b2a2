"""StackGAN (jobs/tf/models/stackgan.py), the cub dataset (jobs/tf/datasets/cub.py) and the GANs'
sample grids (jobs/tf/samples.py), trained for real at tiny sizes: `mpirun -np 2` (Horovod) and
MirroredStrategy over two logical CPU devices (reduce_to_one), on a tiny CUB layout written here.
"""

from __future__ import annotations

import json
import pickle
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from hpcscale.formats.metrics import load_metrics
from tests.conftest import hpcscale
from tests.integration.test_jobs import TINY, TINY_GAN, needs_horovod, ok, train
from tests.stackgan_fixture import CLASSES, EMB, stackgan_run, write_cub

SG = ["--model", "stackgan", "--image-size", "16", "--width", "4", "--latent-dim", "8",
      "--embedding-dim", str(EMB), "--condition-dim", "8", "--batch-per-rank", "2"]  # fmt: skip
MIRRORED = ["--strategy", "mirrored", "--devices", "2", "--cross-device-ops", "reduce_to_one"]


def png_size(path: Path) -> tuple[int, int]:
    """(height, width) of a PNG, decoded by TensorFlow."""
    import tensorflow as tf

    img = tf.io.decode_png(path.read_bytes())
    assert img.shape[2] == 3
    return int(img.shape[0]), int(img.shape[1])


def grid(px: int) -> tuple[int, int]:
    from jobs.tf.samples import grid_size

    return grid_size(px)


def metrics_of(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


# -- real runs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stage1_np2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("stackgan1")
    ok(train(run, *SG, *TINY))
    return run


@pytest.fixture(scope="module")
def stage2_np2_pretrained(stackgan_campaign: Path) -> Path:
    """Stage 2 without a weights file: Stage-I first, on cub data (2 images per class), under
    Horovod at 2 ranks: the session's StackGAN campaign's run (tests/stackgan_fixture.py)."""
    return stackgan_run(stackgan_campaign)


@needs_horovod
def test_stage1_np2_trains_in_sync_and_writes_grid_and_weights(stage1_np2: Path) -> None:
    m = metrics_of(stage1_np2)
    assert m["model"] == "stackgan" and m["ranks"] == 2
    assert set(m["losses"]) == {"d_loss", "g_loss", "kl_loss"}
    assert m["sync_check"]["identical"] and len(m["sync_check"]["digests"]) == 2
    assert m["losses"]["kl_loss"][0] > 0
    assert png_size(stage1_np2 / "samples" / "epoch_001.png") == grid(16)
    assert sorted(p.name for p in (stage1_np2 / "samples").iterdir()) == ["epoch_001.png"]
    assert (stage1_np2 / "stage1_generator.weights.h5").stat().st_size > 0
    load_metrics(stage1_np2 / "metrics.json")  # the schema accepts it


@needs_horovod
def test_stage2_np2_trains_stage1_first_on_cub(stage2_np2_pretrained: Path) -> None:
    run = stage2_np2_pretrained
    m = metrics_of(run)
    assert m["sync_check"]["identical"]
    assert m["dataset_size"] == 6  # 2 of 3 images in each of 3 classes
    assert "cub" in m["data"] and "32 px" in m["data"]
    record = json.loads((run / "stage1.json").read_text())
    assert record["stage1_weights"] is None
    assert (record["steps"], record["images"]) == (2, 8)
    assert record["time_s"] > 0 and set(record["losses"]) == {"d_loss", "g_loss", "kl_loss"}
    assert png_size(run / "samples" / "epoch_001.png") == grid(32)
    assert png_size(run / "samples" / "epoch_001_stage1.png") == grid(16)
    assert m["params"]["stage1_generator"]["trainable"] == 0  # frozen for Stage-II


@needs_horovod
def test_stage2_mirrored_starts_from_a_stage1_weights_file(
    stage1_np2: Path, tmp_path: Path
) -> None:
    weights = stage1_np2 / "stage1_generator.weights.h5"
    ok(train(tmp_path, *SG, *TINY, *MIRRORED, "--stage", "2", "--stage2-factor", "2",
             "--stage1-weights", str(weights), np=None))  # fmt: skip
    m = metrics_of(tmp_path)
    assert (m["strategy"], m["replicas"], m["cross_device_ops"]) == ("mirrored", 2, "reduce_to_one")
    assert m["sync_check"]["identical"] and len(m["sync_check"]["digests"]) == 2
    record = json.loads((tmp_path / "stage1.json").read_text())
    assert record == {"stage1_weights": str(weights), "steps": 0}
    assert png_size(tmp_path / "samples" / "epoch_001.png") == grid(32)
    assert png_size(tmp_path / "samples" / "epoch_001_stage1.png") == grid(16)
    # a file that does not fit the geometry is refused, naming it
    bad = [*SG, "--latent-dim", "9", "--stage", "2", "--stage1-weights", str(weights)]
    proc = train(tmp_path / "bad", *bad, "--epochs", "1", np=None)  # the last --latent-dim wins
    assert proc.returncode == 2, proc.stderr
    assert f"--stage1-weights {weights}: does not fit" in proc.stderr


def test_stage1_mirrored_on_cub_writes_a_grid_per_epoch(cub_dir: Path, tmp_path: Path) -> None:
    cub = ["--dataset", "cub", "--data-dir", str(cub_dir), "--check-sync", "--threads", "1"]
    ok(train(tmp_path, *SG, *MIRRORED, "--epochs", "2", "--steps-per-epoch", "1", *cub, np=None))
    m = metrics_of(tmp_path)
    assert m["dataset_size"] == 9 and m["sync_check"]["identical"]
    assert len(m["losses"]["kl_loss"]) == 2
    for epoch in ("001", "002"):
        assert png_size(tmp_path / "samples" / f"epoch_{epoch}.png") == grid(16)


def test_dcgan_writes_sample_grids_from_a_fixed_noise(tmp_path: Path) -> None:
    """Two runs with the same seed write the same grids. They are independent processes and
    nothing here measures time or load, so they train side by side."""
    args = [*TINY_GAN, "--model", "dcgan", "--epochs", "2", "--steps-per-epoch", "1"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        a, b = pool.map(lambda name: train(tmp_path / name, *args, np=None), ("a", "b"))
    ok(a)
    for epoch in ("001", "002"):
        assert png_size(tmp_path / "a" / "samples" / f"epoch_{epoch}.png") == grid(16)
    ok(b)  # same seed: the same grids
    for epoch in ("001", "002"):
        name = f"samples/epoch_{epoch}.png"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


# -- the cub reader ----------------------------------------------------------------------------


def cub_cfg(root: Path, **kw: object) -> object:
    from jobs.tf.train import config_from_args

    args = [*SG, "--run-dir", str(root / "run"), "--dataset", "cub", "--data-dir", str(root)]
    for k, v in kw.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return config_from_args(args)


def test_cub_pairs_images_with_their_captions_and_subsamples_per_class(tmp_path: Path) -> None:
    from jobs.tf.datasets.cub import make_cub, read_cub

    names = write_cub(tmp_path, per_class=4, captions=3, npy=True)
    emb = np.load(tmp_path / "train" / "char-CNN-RNN-embeddings.npy")
    cfg = cub_cfg(tmp_path, images_per_class=2)
    paths, rows, kept = read_cub(cfg)
    assert len(kept) == 6 and all(sum(n.startswith(c) for n in kept) == 2 for c in CLASSES)
    assert kept == [n for n in names if n in kept]  # in file order
    assert read_cub(cfg)[2] == kept  # seeded: the same choice every time
    assert read_cub(cub_cfg(tmp_path, images_per_class=2, seed=7))[2] != kept
    assert np.array_equal(rows, emb[[names.index(n) for n in kept]])
    assert all(Path(p).is_file() for p in paths)
    spec = make_cub(cfg, rank=1, shards=2, global_batch=4, process_batch=2)
    images, captions = next(iter(spec.dataset))
    assert images.shape == (2, 16, 16, 3) and captions.shape == (2, EMB)
    mine = {names.index(n) for n in kept[1::2]}  # rank 1's shard
    for vec in captions.numpy():
        assert any(np.allclose(vec, emb[i, j]) for i in mine for j in range(3))
    assert spec.dataset_size == 6 and spec.steps_per_epoch == 1


def test_cub_stage2_reads_images_at_the_stage2_size(tmp_path: Path) -> None:
    from jobs.tf.datasets.cub import make_cub

    write_cub(tmp_path)
    cfg = cub_cfg(tmp_path, stage=2, stage2_factor=4)
    images, _ = next(iter(make_cub(cfg, 0, 1, 2, 2).dataset))
    assert images.shape == (2, 64, 64, 3)


@pytest.mark.parametrize(
    ("breakage", "needle"),
    [
        ("no_filenames", "missing {root}/train/filenames.pickle"),
        ("no_embeddings", "missing {root}/train/char-CNN-RNN-embeddings.pickle or"),
        ("no_image", "missing image {root}/CUB_200_2011/images/002.Laysan_Albatross/"),
        ("short", "{root}/train/char-CNN-RNN-embeddings.pickle: 8 rows but"),
        ("dim", "embeddings of 5 values, but --embedding-dim is 16"),
    ],
)
def test_cub_errors_name_the_missing_or_wrong_file(
    tmp_path: Path, breakage: str, needle: str
) -> None:
    from jobs.tf.config import JobUsageError
    from jobs.tf.datasets.cub import read_cub

    write_cub(tmp_path)
    emb_file = tmp_path / "train" / "char-CNN-RNN-embeddings.pickle"
    if breakage == "no_filenames":
        (tmp_path / "train" / "filenames.pickle").unlink()
    elif breakage == "no_embeddings":
        emb_file.unlink()
    elif breakage == "no_image":
        next((tmp_path / "CUB_200_2011" / "images" / CLASSES[1]).iterdir()).unlink()
    else:
        emb = pickle.loads(emb_file.read_bytes())
        emb_file.write_bytes(pickle.dumps(emb[:8] if breakage == "short" else emb[..., :5]))
    with pytest.raises(JobUsageError) as info:
        read_cub(cub_cfg(tmp_path))
    assert needle.format(root=tmp_path) in str(info.value)


# -- grids and validation (no training) --------------------------------------------------------


def test_grid_tiles_row_major_with_padding() -> None:
    from jobs.tf.samples import COLS, PAD, ROWS, grid_size, tile

    images = -np.ones((ROWS * COLS, 4, 4, 3), np.float32)
    images[COLS + 2] = 1.0  # row 1, column 2
    out = tile(images)
    assert out.shape == (*grid_size(4), 3) == (ROWS * 6 + PAD, COLS * 6 + PAD, 3)
    y, x = PAD + 1 * (4 + PAD), PAD + 2 * (4 + PAD)
    assert (out[y : y + 4, x : x + 4] == 255).all()
    assert out.sum() == 255 * 4 * 4 * 3


BASE = """\
name: t
workload:
  model: stackgan
  args: {ARGS}
system: owens
scaling: weak
matrix:
  batch: 8
"""


@pytest.mark.parametrize(
    ("args", "key", "needle"),
    [
        ("{image_size: 20}", "image_size", "multiple of 8"),
        ("{stage: 3}", "stage", "must be 1 (Stage-I) or 2"),
        ("{stage: 2, stage2_factor: 3}", "stage2_factor", "must be 2, 4 or 8"),
        ("{stage1_weights: w.h5}", "stage1_weights", "is for --stage 2"),
        ("{images_per_class: 20}", "images_per_class", "is for --dataset cub"),
    ],
)
def test_validate_refuses_bad_stackgan_geometry(
    tmp_path: Path, args: str, key: str, needle: str
) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(textwrap.dedent(BASE.replace("{ARGS}", args)))
    proc = hpcscale("validate", str(p))
    err = proc.stderr.replace("\n", "")
    assert proc.returncode == 2, proc.stderr
    assert f"{p}:4 [workload.args.{key}]" in err, proc.stderr
    assert needle in err, proc.stderr


def test_validate_refuses_cub_for_other_models(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    text = BASE.replace("stackgan", "dcgan").replace("{ARGS}", "{dataset: cub, data_dir: /d}")
    p.write_text(text)
    proc = hpcscale("validate", str(p))
    assert proc.returncode == 2 and "for stackgan, not dcgan" in proc.stderr, proc.stderr
