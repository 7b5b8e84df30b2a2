"""Model registry: name -> (workload kind, module). Modules are imported lazily because each
pulls in TensorFlow."""

from __future__ import annotations

import importlib
from types import ModuleType

# name: (workload, module, smallest image size in px the network accepts)
MODELS: dict[str, tuple[str, str, int]] = {
    "dcgan": ("gan", "jobs.models.dcgan", 16),
    "sngan": ("gan", "jobs.models.sngan", 16),
    "wgan_gp": ("gan", "jobs.models.wgan_gp", 16),
    "resnet50": ("cnn", "jobs.models.cnn", 32),
    "inception_v3": ("cnn", "jobs.models.cnn", 75),
    "vgg16": ("cnn", "jobs.models.cnn", 32),
}


def workload_of(model: str) -> str:
    return MODELS[model][0]


def min_image_size(model: str) -> int:
    return MODELS[model][2]


def module_of(model: str) -> ModuleType:
    return importlib.import_module(MODELS[model][1])
