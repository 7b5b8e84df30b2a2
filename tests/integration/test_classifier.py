"""`model: classifier` (Keras `model.fit` + Horovod's Keras API) trained for real under
`mpirun -np 2` on data the tests write (class folders of PNG/JPEG files, TFRecords), and the
metrics every CNN now writes: training and validation loss/accuracy kept apart.

Tiny on purpose: 32 px (MobileNetV2's smallest), three colour classes, a few steps.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpcscale.formats.metrics import load_metrics
from tests.classifier_fixture import COLOURS, PER_CLASS, classifier_run, colour_image
from tests.conftest import hpcscale
from tests.integration.test_jobs import TRAIN, needs_horovod, ok, train

SMALL = ["--image-size", "32", "--batch-per-rank", "4", "--threads", "1"]


@pytest.fixture(scope="module")
def tfrecord_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same kind of images as two ImageNet-style TFRecord shards."""
    import io

    import tensorflow as tf
    from PIL import Image

    root = tmp_path_factory.mktemp("tfrecords")
    rng = np.random.default_rng(1)
    for shard in range(2):
        with tf.io.TFRecordWriter(str(root / f"train-{shard:05d}-of-00002")) as w:
            for i in range(PER_CLASS):
                label = (i + shard) % len(COLOURS)
                buf = io.BytesIO()
                Image.fromarray(colour_image(list(COLOURS.values())[label], rng)).save(buf, "PNG")
                feature = {
                    "image/encoded": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[buf.getvalue()])
                    ),
                    "image/class/label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[label])
                    ),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                w.write(example.SerializeToString())
    return root


@pytest.fixture(scope="module")
def fine_tune_run(classifier_campaign: Path) -> tuple[Path, str]:
    """The session's classifier campaign's 2-rank run (tests/classifier_fixture.py: the saved
    backbone, 3 epochs, the head alone for the first, the top 5 backbone layers unfrozen,
    the seed004_fruits preset with flips, lr 0.002 scaled linearly, sync check, timeline) and
    what its rank 0 printed."""
    run = classifier_run(classifier_campaign, 2)
    return run, (run / "local.out").read_text()


# -- the classifier at np=2 -------------------------------------------------------------------


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_fine_tuned_classifier_keeps_train_and_validation_apart(
    fine_tune_run: tuple[Path, str],
) -> None:
    run, stdout = fine_tune_run
    m = load_metrics(run / "metrics.json")
    assert (m.model, m.workload, m.ranks, m.num_classes) == ("classifier", "cnn", 2, 3)
    assert m.accuracy is None  # the old, ambiguous field is no longer written
    for series in (m.train_accuracy, m.val_accuracy, m.train_loss, m.val_loss, m.val_time_s):
        assert series is not None and len(series) == 3
    assert m.train_accuracy != m.val_accuracy and m.train_loss != m.val_loss
    assert all(0.0 <= a <= 1.0 for a in [*m.train_accuracy, *m.val_accuracy])
    assert all(t > 0 for t in m.val_time_s)
    assert "epoch 3/3" in stdout and "val_accuracy=" in stdout
    # 27 training images (9 held out, 3 per class) in global batches of 8
    assert m.steps_per_epoch == 3 and m.dataset_size == 27


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_fine_tuned_classifier_ranks_agree_and_rate_is_scaled(
    fine_tune_run: tuple[Path, str],
) -> None:
    run, stdout = fine_tune_run
    m = load_metrics(run / "metrics.json")
    assert m.sync_check is not None and m.sync_check.identical and len(m.sync_check.digests) == 2
    assert m.lr == 0.002 and m.lr_scaling == "linear"
    assert m.lr_scaled == pytest.approx(0.004)  # lr x 2 ranks (reference: one rank's batch)
    # the optimizer got it: head phase at the scaled rate, then x 0.1 for the unfrozen layers
    assert "phases=[(0, 1, '0.004', True), (1, 3, '0.0004', False)]" in stdout
    params = m.params["classifier"]
    assert 0 < params.trainable < params.total  # only the top 5 backbone layers and the head
    assert "augment=zoom=0.01,shift=0.01,rotation=0,flip=True" in stdout


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_fit_callbacks_write_steps_and_timeline(fine_tune_run: tuple[Path, str]) -> None:
    run, _ = fine_tune_run
    steps = json.loads((run / "steps.json").read_text())
    assert steps["epoch"] == [0, 0, 0, 1, 1, 1, 2, 2, 2] and steps["step"] == [0, 1, 2] * 3
    assert len(steps["burn_in"]["start_ns"]) == 1
    assert all(e > s for s, e in zip(steps["start_ns"], steps["end_ns"], strict=True))
    assert (run / "timeline.json").stat().st_size > 0


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_classifier_trains_on_tfrecords_with_sgd_warmup(
    tmp_path: Path, tfrecord_data: Path
) -> None:
    proc = ok(train(tmp_path, "--model", "classifier", *SMALL, "--epochs", "1",
                    "--dataset", "tfrecord", "--data-dir", str(tfrecord_data), "--num-classes",
                    "3", "--val-split", "0.25", "--optimizer", "sgd", "--warmup-epochs", "0.5",
                    "--lr", "0.01", "--check-sync"))  # fmt: skip
    m = load_metrics(tmp_path / "metrics.json")
    assert m.val_accuracy is not None and m.train_accuracy is not None
    assert m.sync_check is not None and m.sync_check.identical
    assert m.lr_scaled == pytest.approx(0.02) and "lr=0.02 " in proc.stdout


# -- the custom-loop CNNs write the same fields --------------------------------------------------


@needs_horovod
def test_custom_loop_cnn_validates_each_epoch_outside_the_timed_steps(
    tmp_path: Path, folder_data: Path
) -> None:
    # vgg16: no batch norm, so a 2-step network's validation loss stays finite
    proc = ok(train(tmp_path, "--model", "vgg16", "--image-size", "32", "--batch-per-rank",
                    "2", "--threads", "1", "--epochs", "2", "--steps-per-epoch", "2",
                    "--data-dir", str(folder_data), "--val-split", "0.25", np=None))  # fmt: skip
    m = load_metrics(tmp_path / "metrics.json")
    assert m.accuracy is None and m.losses["loss"] == m.train_loss
    for series in (m.train_accuracy, m.train_loss, m.val_accuracy, m.val_loss, m.val_time_s):
        assert series is not None and len(series) == 2
    assert m.train_loss != m.val_loss and "val_loss=" in proc.stdout
    steps = json.loads((tmp_path / "steps.json").read_text())
    assert len(steps["step"]) == 4  # validation adds no timed steps


# -- usage errors -------------------------------------------------------------------------------


def test_imagenet_weights_without_the_keras_cache_exit_2_naming_the_file(
    tmp_path: Path, folder_data: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    run = tmp_path / "run"
    env_home = {"HOME": str(home)}
    proc = _bare(run, env_home, "--model", "classifier", *SMALL, "--epochs", "1",
                 "--data-dir", str(folder_data), "--weights", "imagenet")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    expected = (
        home
        / ".keras"
        / "models"
        / "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_224_no_top.h5"
    )
    assert str(expected) in proc.stderr and "no download" in proc.stderr
    assert not (run / "metrics.json").exists()


def test_classifier_under_mirrored_exits_2(tmp_path: Path) -> None:
    proc = _bare(tmp_path, {}, "--model", "classifier", *SMALL, "--epochs", "1",
                 "--strategy", "mirrored", "--devices", "2")  # fmt: skip
    assert proc.returncode == 2 and "use --strategy horovod" in proc.stderr
    assert not (tmp_path / "metrics.json").exists()


def test_inception_backbone_below_75_px_is_refused_by_parser_and_validate(tmp_path: Path) -> None:
    from hpcscale.model.workloads import args_problem, manifest

    proc = _bare(tmp_path, {}, "--model", "classifier", "--backbone", "inception_v3",
                 "--image-size", "32")  # fmt: skip
    assert proc.returncode == 2 and "inception_v3 needs at least 75 px" in proc.stderr
    broken = args_problem("classifier", {"backbone": "inception_v3", "image_size": 32}, manifest())
    assert broken is not None and broken[0] == "image_size"
    assert args_problem("classifier", {"backbone": "vgg", "image_size": 32}, manifest())


def _bare(run: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """train.py as one process (no mpirun), with extra environment."""
    cmd = [sys.executable, str(TRAIN), "--run-dir", str(run), *args]
    full = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=full)


# -- the parts, in process ----------------------------------------------------------------------


def test_weights_file_is_loaded_into_the_backbone(
    backbone_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.tf.config import JobUsageError
    from jobs.tf.models.classifier import build_model
    from jobs.tf.train import config_from_args

    cfg = config_from_args(["--model", "classifier", "--run-dir", str(tmp_path), *SMALL,
                            "--weights", str(backbone_file)])  # fmt: skip
    import tensorflow as tf

    saved = tf.keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(32, 32, 3), pooling="avg"
    )
    saved.load_weights(str(backbone_file))
    model, backbone = build_model(cfg, 3)
    assert model.output_shape == (None, 3)
    for a, b in zip(saved.weights, backbone.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(JobUsageError, match="no such weights file"):
        build_model(dataclasses.replace(cfg, weights=str(tmp_path / "missing.h5")), 3)
    # imagenet: the file keras.applications caches, read from the cache, never downloaded
    cache = tmp_path / "keras" / "models"
    cache.mkdir(parents=True)
    name = "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_224_no_top.h5"
    (cache / name).write_bytes(backbone_file.read_bytes())
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    _, cached = build_model(dataclasses.replace(cfg, weights="imagenet"), 3)
    np.testing.assert_array_equal(saved.weights[0].numpy(), cached.weights[0].numpy())


def test_augment_presets_and_overrides(tmp_path: Path) -> None:
    import tensorflow as tf

    from jobs.tf.augment import PRESETS, augmentation_of, augmented
    from jobs.tf.train import config_from_args

    cfg = config_from_args(["--model", "classifier", "--run-dir", str(tmp_path),
                            "--augment", "seed004_caltech", "--aug-zoom", "0.3"])  # fmt: skip
    aug = augmentation_of(cfg)
    assert (aug.zoom, aug.shift, aug.rotation, aug.flip) == (0.3, 0.2, 0.05, True)
    assert (
        augmentation_of(dataclasses.replace(cfg, augment="none", aug_zoom=None)) == PRESETS["none"]
    )
    ramp = np.tile(np.linspace(-1, 1, 16, dtype=np.float32), (16, 1))
    batch = np.stack([np.stack([ramp] * 3, axis=-1)] * 4)
    ds = tf.data.Dataset.from_tensors((batch, np.zeros(4, np.int32)))
    out, _ = next(iter(augmented(ds, aug, seed=0)))
    assert out.shape == batch.shape and not np.allclose(out.numpy(), batch)
    same, _ = next(iter(augmented(ds, PRESETS["none"], seed=0)))
    np.testing.assert_array_equal(same.numpy(), batch)


def test_metrics_written_before_the_split_still_load(
    fine_tune_run: tuple[Path, str], tmp_path: Path
) -> None:
    """An old file: training accuracy under `accuracy`, no train_/val_ fields."""
    data = json.loads((fine_tune_run[0] / "metrics.json").read_text())
    for key in ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "val_time_s"):
        data.pop(key)
    data["accuracy"] = [0.5, 0.75]
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    m = load_metrics(tmp_path / "metrics.json")
    assert m.accuracy == [0.5, 0.75] and m.train_accuracy is None and m.val_accuracy is None


def test_a_diverged_run_with_nan_losses_still_loads(
    fine_tune_run: tuple[Path, str], tmp_path: Path
) -> None:
    """msgspec writes a NaN loss as null (JSON has no NaN); the reader turns it back into NaN
    instead of refusing the whole run, and a null where no number may be is still an error."""
    import math

    from hpcscale.model.errors import InputError

    data = json.loads((fine_tune_run[0] / "metrics.json").read_text())
    data["val_loss"] = [None] * len(data["val_loss"])
    data["losses"] = {k: [None] * len(v) for k, v in data["losses"].items()}
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    m = load_metrics(tmp_path / "metrics.json")
    assert m.val_loss is not None and all(math.isnan(v) for v in m.val_loss)
    assert all(math.isnan(v) for v in next(iter(m.losses.values())))
    data["ranks"] = None
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="ranks"):
        load_metrics(tmp_path / "metrics.json")


def test_models_lists_the_classifier_and_its_arguments() -> None:
    models = json.loads(hpcscale("models", "--json", check=True).stdout)
    clf = {m["name"]: m for m in models}["classifier"]
    assert clf["family"] == "cnn" and clf["min_image_size"] == 32
    args = {a["name"]: a for a in clf["args"]}
    for name in ("backbone", "weights", "fine_tune", "unfreeze_layers", "head_epochs",
                 "fine_tune_lr_factor", "augment", "aug_zoom", "aug_shift", "aug_rotation",
                 "aug_flip", "optimizer", "lr", "val_split", "val_dir", "num_classes",
                 "image_size"):  # fmt: skip
        assert name in args, name
    assert (
        "mobilenet_v2" in args["backbone"]["range"]
        and "seed004_caltech" in args["augment"]["range"]
    )
    assert "backbone" not in {a["name"] for a in {m["name"]: m for m in models}["dcgan"]["args"]}
