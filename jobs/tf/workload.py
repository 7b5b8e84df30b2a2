"""What a model file hands to the harness."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional


@dataclass
class Workload:
    """`networks` are Keras models; `optimizers` are keyed by the name of the network each one
    trains; `train_step(batch)` runs one step on this replica and returns scalar tensors to
    report (replica-local means: losses, and `accuracy` for classifiers).

    Optional hooks, all run outside the timed steps: `samples()` (rank 0, end of each epoch)
    returns named batches of images in [-1, 1] for jobs/tf/samples.py's grids ("" is the main grid);
    `pretrain(batches)` (every rank, before burn-in) trains what the timed run starts from;
    `save(run_dir)` (rank 0, after training) writes weights other runs start from."""

    networks: list[Any]
    optimizers: dict[str, Any]
    train_step: Callable[[Any], dict[str, Any]]
    samples: Optional[Callable[[], dict[str, Any]]] = None
    pretrain: Optional[Callable[[Iterator[Any]], None]] = None
    save: Optional[Callable[[Path], None]] = None
