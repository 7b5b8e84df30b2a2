"""One real StackGAN Stage-II run per test session, shared by StackGAN's own tests
(tests/integration/test_stackgan.py: Stage-I trained first on cub data, in sync at 2 ranks) and
the report's sample grids (tests/integration/test_report_training.py: Stage-I beside Stage-II).

A tiny Stage-II (16 px Stage-I, x2) on a tiny CUB layout written here, 2 ranks, submitted
through the real CLI with the local backend. Each test module used to train its own (the report
at 1 rank on synthetic data, StackGAN's test at 2 ranks on cub): one run now serves both.
Read-only: copy it before changing anything."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import hpcscale

EMB = 16  # --embedding-dim of every StackGAN run in the tests
CLASSES = ("001.Black_footed_Albatross", "002.Laysan_Albatross", "003.Sooty_Albatross")
NAME = "sg"
CAMPAIGN = """\
name: sg
description: tiny StackGAN Stage-II on cub (Stage-I trained first, untimed), 2 ranks
workload:
  model: stackgan
  epochs: 1
  args: {{image_size: 16, width: 4, latent_dim: 8, embedding_dim: {emb}, condition_dim: 8,
          stage: 2, stage2_factor: 2, stage1_steps: 2, steps_per_epoch: 2, dataset: cub,
          data_dir: {data}, images_per_class: 2, check_sync: true}}
system: local
scaling: weak
matrix:
  layout: ["2x1"]
  batch: 2
"""


def write_cub(root: Path, per_class: int = 3, captions: int = 2, npy: bool = False) -> list[str]:
    """A tiny CUB layout: JPEGs in class folders, filenames.pickle, the embeddings array."""
    from PIL import Image

    names = []
    for c, cls in enumerate(CLASSES):
        folder = root / "CUB_200_2011" / "images" / cls
        folder.mkdir(parents=True)
        for i in range(per_class):
            name = f"{cls}/{cls.split('.')[1]}_{i:04d}_{c}{i}"
            img = Image.new("RGB", (23, 19), (40 * c, 60 * i, 90))
            img.save(root / "CUB_200_2011" / "images" / f"{name}.jpg")
            names.append(name)
    (root / "train").mkdir()
    (root / "train" / "filenames.pickle").write_bytes(pickle.dumps(names, protocol=2))
    emb = np.random.default_rng(0).standard_normal((len(names), captions, EMB)).astype("float32")
    if npy:
        np.save(root / "train" / "char-CNN-RNN-embeddings.npy", emb)
    else:
        (root / "train" / "char-CNN-RNN-embeddings.pickle").write_bytes(pickle.dumps(emb))
    return names


@pytest.fixture(scope="session")
def cub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny CUB layout (3 classes of 3 images, 2 captions each). Read-only."""
    root = tmp_path_factory.mktemp("cub")
    write_cub(root)
    return root


@pytest.fixture(scope="session")
def stackgan_campaign(tmp_path_factory: pytest.TempPathFactory, cub_dir: Path) -> Path:
    """The workdir of the finished campaign `sg` (one run, not collected). Read-only."""
    base = tmp_path_factory.mktemp("stackgan_campaign")
    camp = base / "sg.yaml"
    camp.write_text(CAMPAIGN.format(emb=EMB, data=cub_dir))
    wd = base / "runs"
    hpcscale("submit", str(camp), "--backend", "local", "-w", str(wd), check=True, timeout=1800)
    return wd


def stackgan_run(workdir: Path) -> Path:
    """The campaign's one run directory."""
    (run,) = list((workdir / NAME / "runs").iterdir())
    return run
