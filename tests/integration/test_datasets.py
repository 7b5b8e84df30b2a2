"""The input formats (jobs/tf/datasets) on tiny real datasets written here, and the learning-rate
rule: folder (stratified, seeded split; --val-dir), flat (centre crop), tfrecord (written by
TensorFlow), sharding by rank under real mpirun, a DCGAN trained on a flat directory at np=2.

Every image i is one solid colour (8i, 255 - 8i, 100), so whatever comes out of a pipeline
names the image it came from.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hpcscale.formats.metrics import load_metrics
from jobs.tf.config import JobUsageError, lr_scale, scaled_lr
from tests.conftest import REPO, hpcscale
from tests.integration.test_jobs import needs_horovod, ok, train

TRAIN = REPO / "jobs" / "tf" / "train.py"
SIZE = 16


def colour(i: int) -> tuple[int, int, int]:
    return (8 * i, 255 - 8 * i, 100)


def save(path: Path, i: int, size: tuple[int, int] = (20, 24)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour(i)).save(path, quality=95)


def encoded(i: int, fmt: str = "JPEG") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (20, 20), colour(i)).save(buf, fmt, quality=95)
    return buf.getvalue()


def ids_of(images: Any) -> list[int]:
    """The image numbers of a batch of [-1, 1] images (their top-left red value)."""
    return [round((float(img[0, 0, 0]) + 1.0) * 127.5 / 8) for img in images]


def class_folder(root: Path, sizes: list[int]) -> dict[int, int]:
    """Classes c0, c1, ... holding `sizes` images (PNG and JPEG); {image number: label}."""
    labels, i = {}, 0
    for label, n in enumerate(sizes):
        for _ in range(n):
            save(root / f"c{label}" / f"{i:02d}.{'png' if i % 2 else 'jpg'}", i)
            labels[i], i = label, i + 1
    return labels


def write_tfrecord(path: Path, numbers: list[int], classes: int = 3) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as w:
        for i in numbers:
            feature = {
                "image/encoded": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[encoded(i)])
                ),
                "image/class/label": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[i % classes])
                ),
            }
            w.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


def config(tmp_path: Path, *args: str, model: str = "resnet50") -> Any:
    from jobs.tf.train import config_from_args

    px = "32" if model == "resnet50" else str(SIZE)
    return config_from_args(["--model", model, "--run-dir", str(tmp_path / "run"),
                             "--image-size", px, "--batch-per-rank", "2", *args])  # fmt: skip


def read(spec: Any, labelled: bool = True) -> tuple[dict[int, int], dict[int, int]]:
    """({image: label} of one pass over the training shard, the same of the validation shard)."""

    def pairs(batches: Any) -> dict[int, int]:
        out: dict[int, int] = {}
        for b in batches:
            imgs, labels = b if labelled else (b, [-1] * len(b))
            out.update(zip(ids_of(imgs), (int(x) for x in labels), strict=True))
        return out

    train = pairs(b for b, _ in zip(spec.dataset, range(3 * spec.dataset_size), strict=False))
    val = pairs(spec.val_dataset) if spec.val_dataset is not None else {}
    return train, val


# -- folder ------------------------------------------------------------------------------------


@pytest.mark.horovod
def test_folder_split_is_seeded_stratified_and_disjoint(tmp_path: Path) -> None:
    from jobs.tf.datasets import make_data

    labels = class_folder(tmp_path / "data", [10, 6, 2, 1])
    base = ("--data-dir", str(tmp_path / "data"), "--val-split", "0.25")
    spec = make_data(config(tmp_path, *base), 0, 1, 2, 2)
    train, val = read(spec)
    per_class = [sum(1 for lab in val.values() if lab == c) for c in range(4)]
    assert per_class == [3, 2, 1, 0]  # half up (2.5 -> 3), at least 1, never a whole class
    assert set(train).isdisjoint(val) and {**train, **val} == labels
    assert (spec.val_size, spec.val_images, spec.dataset_size) == (6, 6, 13)
    assert (spec.classes, spec.num_classes) == (["c0", "c1", "c2", "c3"], 4)
    assert spec.input_images_per_s > 0
    again = make_data(config(tmp_path, *base), 0, 1, 2, 2)
    assert read(again)[1] == val
    other = make_data(config(tmp_path, *base, "--seed", "7"), 0, 1, 2, 2)
    assert read(other)[1] != val


@pytest.mark.horovod
def test_held_out_rounds_half_up_keeps_one_and_never_all() -> None:
    from jobs.tf.datasets.pipeline import held_out

    assert [held_out(0.25, n) for n in (1, 2, 3, 6, 10)] == [0, 1, 1, 2, 3]
    assert held_out(0.9, 5) == 4 and held_out(0.0, 10) == 0 and held_out(0.01, 2) == 1


@pytest.mark.horovod
def test_val_dir_holds_the_validation_split_with_the_same_classes(tmp_path: Path) -> None:
    from jobs.tf.datasets import make_data

    class_folder(tmp_path / "train", [3, 3])
    for i, c in ((20, "c0"), (21, "c1"), (22, "c1")):
        save(tmp_path / "val" / c / f"{i}.png", i)
    args = ("--data-dir", str(tmp_path / "train"), "--val-dir", str(tmp_path / "val"))
    train, val = read(make_data(config(tmp_path, *args), 0, 1, 2, 2))
    assert val == {20: 0, 21: 1, 22: 1} and len(train) == 6
    save(tmp_path / "val" / "c9" / "23.png", 23)
    with pytest.raises(JobUsageError, match=r"other classes.*extra \['c9'\]"):
        make_data(config(tmp_path, *args), 0, 1, 2, 2)


@pytest.mark.horovod
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--num-classes", "5"], "--num-classes 5 but --data-dir"),
        (["--val-split", "1"], "--val-split: must be < 1"),
        (["--val-split", "0.2", "--dataset", "synthetic"], "--dataset synthetic reads no"),
        (["--dataset", "flat"], "--dataset flat: flat images are unlabelled"),
        (["--dataset", "csv"], "expected one of synthetic, folder"),
    ],
)
def test_bad_data_arguments_exit_2_with_one_line(
    tmp_path: Path, extra: list[str], needle: str
) -> None:
    class_folder(tmp_path / "data", [2, 2])
    argv = ["--model", "resnet50", "--run-dir", str(tmp_path / "run"), "--image-size", "32",
            "--batch-per-rank", "2", "--data-dir", str(tmp_path / "data"), *extra]  # fmt: skip
    proc = subprocess.run([sys.executable, str(TRAIN), *argv], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


# -- flat ----------------------------------------------------------------------------------------


@pytest.mark.horovod
def test_flat_cuts_a_centred_square_then_resizes(tmp_path: Path) -> None:
    """48 x 32 px, blue, with a red 16 x 16 px square in the middle."""
    import numpy as np
    from PIL import Image

    from jobs.tf.datasets import make_data

    pixels = np.zeros((32, 48, 3), np.uint8)
    pixels[:] = (0, 0, 255)
    pixels[8:24, 16:32] = (255, 0, 0)
    for i in range(2):
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
    red, blue = np.array([1.0, -1.0, -1.0]), np.array([-1.0, -1.0, 1.0])

    def first(*args: str) -> Any:
        cfg = config(
            tmp_path, "--dataset", "flat", "--data-dir", str(tmp_path), *args, model="dcgan"
        )
        return make_data(cfg, 0, 1, 2, 2).dataset.take(1).get_single_element()[0].numpy()

    img = first("--center-crop", "16")
    assert img.shape == (SIZE, SIZE, 3)
    assert np.allclose(img, red, atol=0.02)  # only the red square is left
    img = first()  # the shorter side: 32 px, the red square at 8..24 of it, so 4..12 out
    for x, want in ((3, blue), (4, red), (11, red), (12, blue)):  # stretched: red at 6..10
        assert np.allclose(img[8, x], want, atol=0.02), (x, img[8, x])
    assert np.allclose(img[0, 8], blue, atol=0.02) and np.allclose(img[15, 8], blue, atol=0.02)


# -- tfrecord ------------------------------------------------------------------------------------


@pytest.fixture
def tfrecords(tmp_path: Path) -> Path:
    root = tmp_path / "imagenet"
    root.mkdir()
    write_tfrecord(root / "train-00000-of-00002", list(range(5)))
    write_tfrecord(root / "train-00001-of-00002", list(range(5, 9)))
    write_tfrecord(root / "validation-00000-of-00001", [20, 21, 22])
    return root


@pytest.mark.horovod
def test_tfrecord_reads_labels_and_shards_by_file_or_record(
    tmp_path: Path, tfrecords: Path
) -> None:
    from jobs.tf.datasets import make_data

    args = ("--dataset", "tfrecord", "--data-dir", str(tfrecords), "--num-classes", "3")
    spec = make_data(config(tmp_path, *args), 0, 1, 2, 2)
    train, val = read(spec)
    assert train == {i: i % 3 for i in range(9)} and val == {i: i % 3 for i in (20, 21, 22)}
    assert (spec.dataset_size, spec.val_size, spec.num_classes) == (9, 3, 3)
    for shards, expect in ((2, [set(range(5)), set(range(5, 9))]), (3, None)):
        parts = [read(make_data(config(tmp_path, *args), r, shards, 2 * shards, 2))
                 for r in range(shards)]  # fmt: skip
        trains = [set(t) for t, _ in parts]
        assert set().union(*trains) == set(range(9)) and sum(map(len, trains)) == 9
        assert sum(len(v) for _, v in parts) == 3
        if expect:  # as many files as ranks: whole files
            assert trains == expect
    held = make_data(config(tmp_path, *args, "--val-split", "0.25"), 0, 1, 2, 2)
    assert sorted(read(held)[1]) == [0, 5]  # the first record of each file
    with pytest.raises(JobUsageError, match="image/class/label outside"):
        make_data(config(tmp_path, *args[:-1], "2"), 0, 1, 2, 2)


# -- under mpirun --------------------------------------------------------------------------------

SHARD_SCRIPT = """\
import json, os, sys
sys.path.insert(0, {repo!r})
from jobs.tf.train import config_from_args
from jobs.tf.datasets import make_data
rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
ids = lambda imgs: [round((float(x[0, 0, 0]) + 1.0) * 127.5 / 8) for x in imgs]
out = {{}}
for name, argv in json.loads(sys.argv[1]).items():
    spec = make_data(config_from_args(argv), rank, size, 2 * size, 2)
    pick = (lambda b: b) if "dcgan" in argv else (lambda b: b[0])
    train = {{i for b, _ in zip(spec.dataset, range(3 * spec.dataset_size)) for i in ids(pick(b))}}
    val = [i for b in (spec.val_dataset or []) for i in ids(pick(b))]
    out[name] = {{"train": sorted(train), "val": val, "val_images": spec.val_images}}
json.dump(out, open(os.path.join(sys.argv[2], f"{{rank}}.json"), "w"))
"""


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_ranks_read_disjoint_shards_under_mpirun(tmp_path: Path, tfrecords: Path) -> None:
    class_folder(tmp_path / "folder", [5, 4])
    for i in range(7):
        save(tmp_path / "flat" / f"{i}.{'png' if i % 2 else 'jpg'}", i)
    one = tmp_path / "one"
    one.mkdir()
    write_tfrecord(one / "train-00000-of-00001", list(range(7)))
    common = ["--run-dir", str(tmp_path / "run"), "--batch-per-rank", "2", "--image-size", "32"]
    cases = {
        "folder": ["--model", "resnet50", "--data-dir", str(tmp_path / "folder"),
                   "--val-split", "0.3"],
        "flat": ["--model", "dcgan", "--dataset", "flat", "--data-dir", str(tmp_path / "flat"),
                 "--val-split", "0.3"],
        "files": ["--model", "resnet50", "--dataset", "tfrecord", "--data-dir", str(tfrecords),
                  "--num-classes", "3"],
        "records": ["--model", "resnet50", "--dataset", "tfrecord", "--data-dir", str(one),
                    "--num-classes", "3"],
    }  # fmt: skip
    script = tmp_path / "shards.py"
    script.write_text(SHARD_SCRIPT.format(repo=str(REPO)))
    argv = json.dumps({k: [*v, *common] for k, v in cases.items()})
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root",
           sys.executable, str(script), argv, str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})  # fmt: skip
    ok(proc)
    ranks = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    totals = {"folder": 9, "flat": 7, "files": 12, "records": 7}
    for name, total in totals.items():
        a, b = (r[name] for r in ranks)
        assert set(a["train"]).isdisjoint(b["train"]), name
        assert set(a["val"]).isdisjoint(b["val"]), name
        assert [len(a["val"]), len(b["val"])] == [a["val_images"], b["val_images"]], name
        seen = set(a["train"]) | set(b["train"]) | set(a["val"]) | set(b["val"])
        assert len(seen) == total, (name, seen)
        assert not (set(a["train"]) | set(b["train"])) & (set(a["val"]) | set(b["val"])), name
    assert sorted(ranks[0]["files"]["val"] + ranks[1]["files"]["val"]) == [20, 21, 22]


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_dcgan_trains_on_a_flat_directory_at_np2(tmp_path: Path) -> None:
    """The issue's `flat` run: PNG and JPEG faces-to-be, centre-cropped, two ranks."""
    for i in range(12):
        save(tmp_path / "faces" / f"{i:03d}.{'png' if i % 2 else 'jpg'}", i, (24, 30))
    run = tmp_path / "run"
    ok(train(run, "--model", "dcgan", "--dataset", "flat", "--data-dir", str(tmp_path / "faces"),
             "--center-crop", "20", "--image-size", "16", "--width", "4", "--latent-dim", "8",
             "--batch-per-rank", "2", "--epochs", "2", "--threads", "1", "--check-sync",
             "--lr", "0.001", "--warmup-epochs", "1"))  # fmt: skip
    m = load_metrics(run / "metrics.json")
    assert m.data == f"flat:{tmp_path / 'faces'}"
    assert (m.dataset_size, m.steps_per_epoch) == (12, 3)
    assert m.input_images_per_s is not None and m.input_images_per_s > 0
    assert (m.lr_scaling, m.lr_ref_batch, m.lr) == ("linear", 2, 0.001)
    assert m.lr_scaled == pytest.approx(0.002)  # global batch 4 / reference 2
    assert m.sync_check is not None and m.sync_check.identical


# -- the learning-rate rule ----------------------------------------------------------------------


def test_scaled_lr_follows_the_rule_after_warm_up() -> None:
    assert scaled_lr(0, 0.1, 0, 256, 64, "linear") == pytest.approx(0.4)
    assert scaled_lr(0, 0.1, 0, 256, 64, "sqrt") == pytest.approx(0.2)
    assert scaled_lr(0, 0.1, 0, 256, 64, "none") == pytest.approx(0.1)
    assert scaled_lr(0, 0.1, 0, 64, 256, "linear") == pytest.approx(0.025)  # smaller batch
    for rule, eta in (("linear", 0.4), ("sqrt", 0.2), ("none", 0.1)):
        assert scaled_lr(0, 0.1, 100, 256, 64, rule) == pytest.approx(0.1)  # warm-up from lr
        assert scaled_lr(50, 0.1, 100, 256, 64, rule) == pytest.approx((0.1 + eta) / 2)
        assert scaled_lr(100, 0.1, 100, 256, 64, rule) == pytest.approx(eta)
        assert scaled_lr(900, 0.1, 100, 256, 64, rule) == pytest.approx(eta)
    assert lr_scale("linear", 128, 128) == 1.0  # strong scaling: reference = the global batch


CAMPAIGN = """\
name: lr
workload:
  model: dcgan
  args: {args}
system: owens
scaling: {scaling}
matrix:
  nodes: [1, 2]
  batch: 8
"""


@pytest.mark.parametrize(
    ("scaling", "args", "expect"),
    [
        ("strong", "{image_size: 32}", ["8", "8"]),  # the global batch: the same rate
        ("strong", "{image_size: 32, lr_ref_batch: 4}", ["4", "4"]),  # the campaign's own
        ("weak", "{image_size: 32}", [None, None]),  # the job's default: one replica's batch
    ],
)
def test_strong_scaling_keeps_the_rate(
    tmp_path: Path, scaling: str, args: str, expect: list[str | None]
) -> None:
    from hpcscale.api import plan_campaign
    from hpcscale.frameworks.tf_jobs import program_argv
    from hpcscale.model.system import load_system

    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.format(scaling=scaling, args=args))
    _, plan = plan_campaign(path)
    found = []
    for run in plan.runs:
        argv = [str(a) for a in program_argv(run, load_system("owens"), tmp_path)]
        assert argv.count("--lr-ref-batch") <= 1
        found.append(argv[argv.index("--lr-ref-batch") + 1] if "--lr-ref-batch" in argv else None)
    assert found == expect
    assert ({r.global_batch for r in plan.runs} == {8}) == (scaling == "strong")


def test_validate_refuses_a_value_outside_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.format(scaling="weak", args="{image_size: 32, lr_scaling: cubic}"))
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.replace("\n", "")
    assert f"{path}:4 [workload.args.lr_scaling]" in err, proc.stderr
    assert "expected one of linear, sqrt, none" in err, proc.stderr
    assert "internal error" not in err


def test_help_names_the_formats_and_the_rule() -> None:
    out = subprocess.run([sys.executable, str(TRAIN), "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout  # fmt: skip
    for needle in ("--dataset {synthetic,folder,flat,tfrecord,cub}", "train-*-of-*", "--val-split",
                   "--val-dir", "--center-crop", "--lr-scaling {linear,sqrt,none}",
                   "--lr-ref-batch", "input_images_per_s"):  # fmt: skip
        assert needle in out, needle
