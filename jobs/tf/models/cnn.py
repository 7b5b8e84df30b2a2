"""Image classifiers from tf.keras.applications (ResNet50, InceptionV3, VGG16), randomly
initialised (weights=None) at --image-size px with --num-classes classes; softmax cross-entropy
on logits, SGD with momentum 0.9 (the Horovod benchmarks' optimizer)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from jobs.tf.config import JobConfig
from jobs.tf.distribute import DistContext
from jobs.tf.workload import Workload

DEFAULT_LR = 0.0125

APPLICATIONS = {
    "resnet50": tf.keras.applications.ResNet50,
    "inception_v3": tf.keras.applications.InceptionV3,
    "vgg16": tf.keras.applications.VGG16,
}


def build(cfg: JobConfig, ctx: DistContext) -> Workload:
    net = APPLICATIONS[cfg.model](
        weights=None,
        input_shape=(cfg.image_size, cfg.image_size, 3),
        classes=cfg.num_classes,
        classifier_activation=None,
    )
    lr = cfg.lr if cfg.lr is not None else DEFAULT_LR
    opt = ctx.optimizer("sgd", lr, momentum=0.9)

    def train_step(batch: tuple[tf.Tensor, tf.Tensor]) -> dict[str, Any]:
        images, labels = batch
        with tf.GradientTape() as tape:
            logits = tf.cast(net(images, training=True), tf.float32)
            per = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            loss = ctx.loss(per)
        grads = ctx.gradients(tape, loss, net.trainable_variables, opt)
        ctx.apply(opt, grads, net.trainable_variables)
        hits = tf.equal(tf.argmax(logits, axis=-1, output_type=labels.dtype), labels)
        return {"loss": ctx.mean(per), "accuracy": ctx.mean(hits)}

    return Workload([net], {net.name: opt}, train_step)
