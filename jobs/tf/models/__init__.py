"""Model registry, declared in jobs/tf/manifest.py (name, family, module, smallest image size).
Modules are imported lazily because each pulls in TensorFlow."""

from __future__ import annotations

import importlib
from types import ModuleType

from jobs.tf.manifest import MODELS

__all__ = ["MODELS", "min_image_size", "module_of", "workload_of"]


def workload_of(model: str) -> str:
    return MODELS[model].family


def min_image_size(model: str) -> int:
    return MODELS[model].min_image_size


def module_of(model: str) -> ModuleType:
    return importlib.import_module(MODELS[model].module)
