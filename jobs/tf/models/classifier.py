"""`model: classifier`, seed 004's transfer-learning classifier: a keras.applications backbone
(include_top=False, average pooling) and a Dense head of num_classes logits, trained with Keras
`model.fit` (jobs/tf/keras_fit.py), not the harness' custom loop.

Inputs arrive in [-1, 1] (the input pipeline's range); a preprocessing layer maps them to what
the backbone's ImageNet weights expect. Backbone weights: `none` (random), `imagenet` from the
Keras cache only (this machine has no internet, so a missing file is a usage error naming it,
never a download), or a file written by the backbone's `save_weights`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import tensorflow as tf

from jobs.tf.config import JobConfig, JobUsageError

DEFAULT_LR = 0.001  # Adam's usual rate at one replica's batch

APPS = tf.keras.applications
BACKBONES: dict[str, Any] = {
    "resnet50": APPS.ResNet50,
    "inception_v3": APPS.InceptionV3,
    "vgg16": APPS.VGG16,
    "mobilenet_v2": APPS.MobileNetV2,
    "efficientnet_b0": APPS.EfficientNetB0,
}
# [-1, 1] -> the backbone's input convention ("caffe": BGR minus the ImageNet means, 0-255;
# EfficientNet rescales 0-255 itself; MobileNetV2 and InceptionV3 take [-1, 1])
PREPROCESS: dict[str, Any] = {
    "resnet50": APPS.resnet50.preprocess_input,
    "vgg16": APPS.vgg16.preprocess_input,
    "efficientnet_b0": lambda x: x,
}
MOBILENET_ROWS = (96, 128, 160, 192, 224)  # sizes with their own ImageNet weights files
OPTIMIZERS = {
    # Keras' legacy optimizers: what Horovod 0.28.1's DistributedOptimizer and its learning-rate
    # callbacks (which set `optimizer.lr` and `optimizer.momentum`) work with.
    "adam": lambda lr: tf.keras.optimizers.legacy.Adam(learning_rate=lr),
    "sgd": lambda lr: tf.keras.optimizers.legacy.SGD(learning_rate=lr, momentum=0.9),
    "adadelta": lambda lr: tf.keras.optimizers.legacy.Adadelta(learning_rate=lr),
}


def imagenet_file(backbone: str, image_size: int) -> str:
    """The file name keras.applications caches for the no-top ImageNet weights."""
    if backbone == "mobilenet_v2":
        rows = image_size if image_size in MOBILENET_ROWS else 224
        return f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_{rows}_no_top.h5"
    if backbone == "efficientnet_b0":
        return "efficientnetb0_notop.h5"
    return f"{backbone}_weights_tf_dim_ordering_tf_kernels_notop.h5"


def keras_cache() -> Path:
    """Where keras.applications keeps downloaded weights ($KERAS_HOME/models, ~/.keras/models)."""
    return Path(os.environ.get("KERAS_HOME", "~/.keras")).expanduser() / "models"


def weights_path(cfg: JobConfig) -> Optional[str]:
    """The weights file --weights names (None: random initialisation); JobUsageError when absent."""
    if cfg.weights == "none":
        return None
    if cfg.weights == "imagenet":
        path = keras_cache() / imagenet_file(cfg.backbone, cfg.image_size)
        if not path.is_file():
            raise JobUsageError(
                f"--weights imagenet: {path} not found (no download here: copy the "
                f"keras.applications {cfg.backbone} no-top weights file there, or give "
                "--weights a file path, or --weights none)"
            )
        return str(path)
    given = Path(cfg.weights).expanduser()
    if not (given.is_file() or Path(f"{given}.index").is_file()):
        raise JobUsageError(f"--weights {cfg.weights}: no such weights file")
    return str(given)


def build_model(cfg: JobConfig, num_classes: int) -> tuple[tf.keras.Model, tf.keras.Model]:
    """(the classifier, its backbone) with --weights loaded into the backbone."""
    px = cfg.image_size
    source = weights_path(cfg)
    backbone = BACKBONES[cfg.backbone](
        include_top=False, weights=None, input_shape=(px, px, 3), pooling="avg"
    )
    if source is not None:
        try:
            backbone.load_weights(source)
        except (ValueError, OSError, tf.errors.OpError) as exc:
            raise JobUsageError(
                f"--weights {source}: cannot load into {cfg.backbone} at {px} px: "
                + str(exc).splitlines()[0]
            ) from None
    inputs = tf.keras.Input((px, px, 3), name="image")
    x = inputs
    if cfg.backbone in PREPROCESS:
        x = tf.keras.layers.Rescaling(127.5, offset=127.5, name="to_255")(x)
        x = tf.keras.layers.Lambda(PREPROCESS[cfg.backbone], name="preprocess")(x)
    # fine-tuning keeps batch norm in inference mode (Keras' transfer-learning guide)
    x = backbone(x, training=False if cfg.fine_tune else None)
    logits = tf.keras.layers.Dense(num_classes, dtype="float32", name="head")(x)
    return tf.keras.Model(inputs, logits, name="classifier"), backbone


def set_trainable(backbone: tf.keras.Model, top_layers: Optional[int], frozen: bool) -> None:
    """Freeze the whole backbone, or train only its top `top_layers` layers (None: all)."""
    backbone.trainable = not frozen
    if frozen or top_layers is None:
        return
    for layer in backbone.layers[: max(0, len(backbone.layers) - top_layers)]:
        layer.trainable = False


def optimizer(kind: str, lr: float) -> Any:
    return OPTIMIZERS[kind](lr)
