"""The PyTorch programs' image-folder data (jobs/torch/data.py), on a real folder of PNGs written
here: the TF program's layout (class sub-folders, sorted), batch arithmetic, per-rank shard and
[-1, 1] normalisation, run for real on 1 rank and on 2 ranks under torchrun.

The folder: apple/ 4 images, kiwi/ 3, pear/ 2 (9 images, 3 classes), plus files that are not
images. Image i of class `label` is one colour, red = 60 * label + 10 * i, green 100, blue 200,
so a decoded pixel names its image and its class.

Without torch these tests skip, unless HPCSCALE_REQUIRE_TORCH=1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hpcscale.devcluster import loopback
from hpcscale.formats.metrics import load_metrics
from hpcscale.formats.steps import load_steps_file

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "jobs" / "torch" / "train.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"
HAVE_TORCH = importlib.util.find_spec("torch") is not None
REQUIRE_TORCH = os.environ.get("HPCSCALE_REQUIRE_TORCH") == "1"
pytestmark = pytest.mark.skipif(
    not HAVE_TORCH and not REQUIRE_TORCH,
    reason="torch not installed (make setup installs it; HPCSCALE_REQUIRE_TORCH=1 fails here)",
)
CLASSES = {"apple": 4, "kiwi": 3, "pear": 2}  # 9 images
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
               "MASTER_PORT", "TORCHELASTIC_", "OMPI_", "PMI_", "MV2_", "SLURM_",
               "PMIX_")  # fmt: skip
COMMON = ["--image-size", "32", "--batch-per-rank", "2", "--epochs", "1", "--threads", "1"]
GAN = ["--model", "dcgan", "--width", "16"]
CNN = ["--model", "classifier", "--backbone", "vgg16"]


def red(label: int, i: int) -> int:
    return 60 * label + 10 * i


def write_folder(root: Path) -> Path:
    from PIL import Image

    for label, (name, n) in enumerate(CLASSES.items()):
        (root / name).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (32, 32), (red(label, i), 100, 200)).save(root / name / f"{i}.png")
        (root / name / "notes.txt").write_text("not an image\n")
    (root / "stray.png").write_bytes(b"")  # outside any class folder: not read
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_folder(tmp_path_factory.mktemp("fruit") / "train")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}


# ---------------------------------------------------------------- decoding, listing, stream


def test_a_pixel_read_back_is_the_written_value_normalised(tmp_path: Path) -> None:
    """x / 127.5 - 1 by hand: 51 -> -0.6, 0 -> -1, 255 -> 1, 204 -> 0.6; a grey image gives
    three equal channels; a one-colour image resized (40 x 48 -> 32 x 32) keeps its colour."""
    from PIL import Image

    from jobs.torch.data import decode

    img = Image.new("RGB", (32, 32), (127, 127, 127))
    img.putpixel((0, 0), (51, 0, 255))
    img.save(tmp_path / "dot.png")
    x = decode(str(tmp_path / "dot.png"), 32)
    assert tuple(x.shape) == (3, 32, 32)
    assert x[:, 0, 0].tolist() == pytest.approx([-0.6, -1.0, 1.0], abs=1e-6)
    assert x[:, 5, 7].tolist() == pytest.approx([127 / 127.5 - 1] * 3, abs=1e-6)
    Image.new("L", (32, 32), 204).save(tmp_path / "grey.png")
    assert decode(str(tmp_path / "grey.png"), 32)[:, 3, 3].tolist() == pytest.approx(
        [0.6] * 3, abs=1e-6
    )
    Image.new("RGB", (40, 48), (10, 200, 255)).save(tmp_path / "big.png")
    big = decode(str(tmp_path / "big.png"), 32)
    assert tuple(big.shape) == (3, 32, 32)
    want = [10 / 127.5 - 1, 200 / 127.5 - 1, 1.0]  # -0.92157, 0.56863, 1
    assert big.amin(dim=(1, 2)).tolist() == pytest.approx(want, abs=1e-5)
    assert big.amax(dim=(1, 2)).tolist() == pytest.approx(want, abs=1e-5)


def test_decoding_equals_the_tensorflow_programs(tmp_path: Path) -> None:
    """A noisy image resized both ways (down and up): the TF pipeline's decode, pixel for pixel."""
    pytest.importorskip("tensorflow")
    import numpy as np
    import tensorflow as tf
    from PIL import Image

    from jobs.tf.datasets.pipeline import IMAGE_SUFFIXES
    from jobs.tf.datasets.pipeline import decode as tf_decode
    from jobs.torch import data

    assert data.IMAGE_SUFFIXES == IMAGE_SUFFIXES
    rng = np.random.default_rng(7)
    for h, w, px in ((37, 53, 32), (20, 30, 64), (32, 32, 32)):
        path = tmp_path / f"n{h}x{w}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        theirs = tf_decode(tf.io.read_file(str(path)), px).numpy().transpose(2, 0, 1)
        ours = data.decode(str(path), px).numpy()
        assert np.abs(ours - theirs).max() <= 1e-6, (h, w, px)


def test_listing_shard_and_subset_are_the_tensorflow_programs(folder: Path) -> None:
    from jobs.torch.data import list_folder

    found = list_folder(folder, global_batch=4, dataset_size=None, seed=0)
    assert found.classes == ["apple", "kiwi", "pear"]
    want = [(str(folder / n / f"{i}.png"), label)
            for label, (n, k) in enumerate(CLASSES.items()) for i in range(k)]  # fmt: skip
    assert found.train == want  # class by class, files sorted
    assert found.shard(0, 2) == want[0::2] and len(found.shard(0, 2)) == 5
    assert found.shard(1, 2) == want[1::2] and len(found.shard(1, 2)) == 4
    sub = list_folder(folder, global_batch=4, dataset_size=5, seed=3)
    assert (
        len(sub.train) == 5 and sub.train == sorted(set(sub.train)) and set(sub.train) < set(want)
    )
    assert list_folder(folder, 4, 5, seed=3).train == sub.train  # the same on every rank
    assert len(list_folder(folder, 4, 50, seed=3).train) == 9  # more than there is: all
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return
    import random

    from jobs.tf.datasets.folder import list_classes, stratified

    classes, files = list_classes(folder)
    tf_train, _ = stratified(files, 0.0, 3)
    assert (classes, tf_train) == (found.classes, found.train)
    random.Random(3).shuffle(tf_train)  # jobs/tf/datasets/folder.py make_folder's subset
    assert sorted(tf_train[:5]) == sub.train


def test_the_stream_is_each_image_once_per_pass_with_its_class_label(folder: Path) -> None:
    """One rank, a batch of all 9: every image once (a pass), each with its folder's label; the
    next pass is another order of the same 9."""
    import torch

    from jobs.torch.data import batches, list_folder

    found = list_folder(folder, 9, None, 0)
    stream = batches(found.shard(0, 1), 32, 9, seed=0, rank=0, labelled=True)
    seen = []
    for _ in range(2):
        images, labels = next(stream)
        assert tuple(images.shape) == (9, 3, 32, 32) and labels.dtype == torch.long
        reds = [round((float(v) + 1) * 127.5) for v in images[:, 0, 0, 0]]
        assert sorted(reds) == sorted(red(lab, i) for lab, n in
                                      enumerate(CLASSES.values()) for i in range(n))  # fmt: skip
        assert [r // 60 for r in reds] == labels.tolist()  # red = 60 * label + 10 * i, i < 4
        seen.append(reds)
    assert seen[0] != seen[1]  # reshuffled each pass (seeded: the same on every run)
    gan = next(batches(found.shard(1, 2), 32, 2, seed=0, rank=1, labelled=False))
    assert tuple(gan.shape) == (2, 3, 32, 32)  # the GAN gets images alone


# ---------------------------------------------------------------- real runs


def _run_all(base: Path, folder: Path) -> dict[str, tuple[Any, Path]]:
    env = clean_env()
    env.update(
        LD_PRELOAD=str(loopback.shim(base, ipv6="refuse")),  # torchrun's store on 127.0.0.1
        GLOO_SOCKET_IFNAME="lo",
        PYTHONUNBUFFERED="1",
    )
    data = ["--data-dir", str(folder)]
    cmds = {
        # 1 rank: global batch 2, 9 // 2 = 4 steps
        "gan1": [sys.executable, str(TRAIN), *GAN, *COMMON, *data],
        # 1 rank, a subset of 5: 5 // 2 = 2 steps
        "cnn1_subset": [sys.executable, str(TRAIN), *CNN, *COMMON, *data, "--dataset-size", "5",
                        "--dataset", "folder"],
        # 2 ranks: global batch 4, 9 // 4 = 2 steps, shards of 5 and 4
        "cnn2": [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(TRAIN), *CNN,
                 *COMMON, *data, "--check-sync"],
    }  # fmt: skip
    procs = {
        name: subprocess.Popen(
            [*cmd, "--run-dir", str(base / name)],
            cwd=base,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, cmd in cmds.items()
    }
    out = {}
    for name, proc in procs.items():
        try:
            text, _ = proc.communicate(timeout=400)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
        out[name] = (SimpleNamespace(returncode=proc.returncode, output=text), base / name)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, folder: Path) -> dict[str, tuple[Any, Path]]:
    if not HAVE_TORCH or not TORCHRUN.exists():
        pytest.fail(f"torch or {TORCHRUN} missing")
    return _run_all(tmp_path_factory.mktemp("runs"), folder)


# name: (ranks, global batch, images per epoch, steps per epoch, each rank's shard, classes)
EXPECTED = {
    "gan1": (1, 2, 9, 4, [9], None),
    "cnn1_subset": (1, 2, 5, 2, [5], 3),
    "cnn2": (2, 4, 9, 2, [5, 4], 3),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_a_folder_run_has_the_hand_computed_batch_arithmetic(
    runs: dict[str, tuple[Any, Path]], folder: Path, name: str
) -> None:
    proc, run = runs[name]
    assert proc.returncode == 0, proc.output[-4000:]
    ranks, global_batch, images, steps, shards, classes = EXPECTED[name]
    m = load_metrics(run / "metrics.json")
    assert (m.ranks, m.global_batch, m.dataset_size, m.steps_per_epoch) == (
        ranks, global_batch, images, steps)  # fmt: skip
    assert m.num_classes == classes  # the classifier's: the class sub-folders
    assert m.data == str(folder)
    assert m.input_images_per_s is not None and m.input_images_per_s > 0
    assert m.images_per_s == pytest.approx([global_batch * steps / t for t in m.epoch_time_s])
    s = load_steps_file(run / "steps.json")
    assert s.epoch == [0] * steps and s.step == list(range(steps))
    ddp = json.loads((run / "ddp.json").read_text())
    assert [r["shard_images"] for r in sorted(ddp["ranks"], key=lambda r: r["rank"])] == shards
    assert f"steps_per_epoch={steps} data={folder}" in proc.output
    if name == "cnn2":
        assert m.sync_check is not None and m.sync_check.identical


@pytest.mark.parametrize("case", ["missing", "empty", "classes", "too_few"])
def test_bad_folder_is_a_usage_error_naming_the_path(tmp_path: Path, case: str) -> None:
    (tmp_path / "empty" / "a").mkdir(parents=True)
    (tmp_path / "empty" / "a" / "readme.txt").write_text("no images\n")
    path = {"missing": tmp_path / "nope", "empty": tmp_path / "empty"}.get(case)
    if path is None:
        path = write_folder(tmp_path / "fruit")
    extra = {"classes": [*CNN, "--num-classes", "5"], "too_few": [*GAN, "--batch-per-rank", "10"]}
    res = subprocess.run(
        [sys.executable, str(TRAIN), *GAN, *COMMON, "--run-dir", str(tmp_path / "run"),
         "--data-dir", str(path), *extra.get(case, [])],
        capture_output=True, text=True, timeout=300, env=clean_env(),
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("train.py: error: "), res.stderr
    assert f"--data-dir {path}" in lines[0]
    why = {
        "missing": "not a directory",
        "empty": "no images found",
        "classes": "--num-classes 5 but --data-dir",
        "too_few": "9 training images, fewer than one global batch (10)",
    }[case]
    assert why in lines[0]


def test_the_campaign_can_pass_the_folder_to_a_ddp_cell() -> None:
    """`args: {dataset: folder, data_dir: ...}` on a torch_ddp cell reaches train.py's flags."""
    from hpcscale.frameworks.torch_ddp import ARGS
    from jobs.torch.train import parser

    dests = {a.dest: a for a in parser()._actions}
    assert {"data_dir", "dataset"} <= set(ARGS) and set(ARGS) <= set(dests)
    assert set(dests["dataset"].choices) == {"synthetic", "folder"}
