"""Keras 2 (TF <= 2.15) vs Keras 3 (TF 2.16-2.18) differences the custom loops touch.

Under Keras 3, model and optimizer variables are `keras.Variable` wrappers; Horovod 0.28.1 calls
`.ref()` on what it is given (`'Variable' object has no attribute 'ref'`), so tapes and
broadcasts must receive the backing `tf.Variable` (`v.value`). Under Keras 2 `.value` is a method
of tf.Variable, so the unwrap must only happen on Keras 3.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf


def keras_version() -> str:
    try:
        import keras

        return str(keras.__version__)
    except ImportError:  # pragma: no cover - keras ships with TensorFlow
        return str(getattr(tf.keras, "__version__", "unknown"))


KERAS3 = int(keras_version().split(".")[0]) >= 3


def tf_variables(variables: Sequence[Any]) -> list[tf.Variable]:
    """The tf.Variables behind model/optimizer variables, as Horovod needs them."""
    if KERAS3:
        return [getattr(v, "value", v) for v in variables]
    return list(variables)


def optimizer_variables(optimizer: Any) -> list[Any]:
    """`variables` is a property on Keras 2.11+ and Keras 3, a method on legacy optimizers."""
    v = optimizer.variables
    return list(v() if callable(v) else v)


def build_optimizer(optimizer: Any, variables: Sequence[Any]) -> None:
    """Create slot variables now, so they exist (and can be broadcast) before step 1."""
    # Keras 2's LossScaleOptimizer does not build its wrapped optimizer; Keras 3's does.
    target = optimizer if KERAS3 else getattr(optimizer, "inner_optimizer", optimizer)
    target.build(list(variables))
