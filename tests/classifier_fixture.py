"""One real classifier campaign per test session, shared by the classifier's own tests
(tests/integration/test_classifier.py: fine-tuning, rate scaling, sync, the fit callbacks) and
the report's learning curves (tests/integration/test_report_training.py).

A fine-tuned MobileNetV2 (a saved backbone, one head epoch then two with the top 5 layers
unfrozen, an augmentation preset, linear rate scaling, weight-sync check, Horovod timeline),
3 epochs at 1 and 2 ranks (3 epochs: the report's plateau needs a window of 3) on three colour
classes written here, submitted through the real CLI with the local backend. Each
test module used to run its own (the report campaign at 1 and 2 ranks, the fine-tune run again at
2): one campaign now serves both, one `mpirun -np 2` run fewer. Read-only: copy a run before
changing it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import hpcscale

COLOURS = {"blue": (30, 40, 220), "green": (30, 200, 40), "red": (220, 30, 30)}
PER_CLASS = 12
NAME = "curves"
CAMPAIGN = """\
name: curves
description: a tiny fine-tuned classifier (seed 004 style), 1 and 2 ranks
workload:
  model: classifier
  epochs: 3
  args: {{image_size: 32, backbone: mobilenet_v2, data_dir: {data}, val_split: 0.25,
          weights: {weights}, fine_tune: true, head_epochs: 1, unfreeze_layers: 5,
          augment: seed004_fruits, aug_flip: true, lr: 0.002, lr_scaling: linear,
          check_sync: true}}
system: local
scaling: weak
matrix:
  layout: ["1x1", "2x1"]
  batch: 4
collect: {{timeline: true}}
"""


def colour_image(rgb: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    """A 24 px image of one colour with noise, so classes differ and images within one do too."""
    noise = rng.integers(-30, 30, (24, 24, 3))
    return np.clip(np.array(rgb) + noise, 0, 255).astype(np.uint8)


@pytest.fixture(scope="session")
def folder_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three classes whose images differ by colour, half PNG and half JPEG. Read-only."""
    from PIL import Image

    root = tmp_path_factory.mktemp("colours")
    rng = np.random.default_rng(0)
    for name, rgb in COLOURS.items():
        (root / name).mkdir()
        for i in range(PER_CLASS):
            img = Image.fromarray(colour_image(rgb, rng))
            img.save(root / name / f"{i}.{'png' if i % 2 else 'jpg'}")
    return root


@pytest.fixture(scope="session")
def backbone_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A backbone's weights saved the way a user keeps a pre-trained one (save_weights)."""
    import tensorflow as tf

    path = tmp_path_factory.mktemp("weights") / "mobilenet_v2_32.h5"
    net = tf.keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(32, 32, 3), pooling="avg"
    )
    net.save_weights(str(path))
    return path


@pytest.fixture(scope="session")
def classifier_campaign(
    tmp_path_factory: pytest.TempPathFactory, folder_data: Path, backbone_file: Path
) -> Path:
    """The workdir of the finished campaign `curves` (not collected or reported). Read-only."""
    base = tmp_path_factory.mktemp("classifier_campaign")
    camp = base / "curves.yaml"
    camp.write_text(CAMPAIGN.format(data=folder_data, weights=backbone_file))
    wd = base / "runs"
    hpcscale("submit", str(camp), "--backend", "local", "-w", str(wd), check=True, timeout=1800)
    return wd


def classifier_run(workdir: Path, ranks: int) -> Path:
    """The campaign's run directory with this many ranks (1 or 2); its rank 0 prints to
    local.out."""
    for rd in sorted((workdir / NAME / "runs").iterdir()):
        if json.loads((rd / "run.json").read_text()).get("ranks") == ranks:
            return rd
    raise AssertionError(f"no {ranks}-rank run under {workdir}")
