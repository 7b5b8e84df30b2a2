"""What a model file hands to the harness."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Workload:
    """`networks` are Keras models; `optimizers` are keyed by the name of the network each one
    trains; `train_step(batch)` runs one step on this replica and returns scalar tensors to
    report (replica-local means: losses, and `accuracy` for classifiers)."""

    networks: list[Any]
    optimizers: dict[str, Any]
    train_step: Callable[[Any], dict[str, Any]]
