"""The published studies hpcscale's tables and figures follow, named as a reader knows them
(the shipped campaigns' descriptions, `hpcscale init --list`, name them the same way): report
text, table headings and figure titles cite these, never an internal number."""

from __future__ import annotations

# StackGAN with tf.distribute.MirroredStrategy on one multi-GPU node.
AHMAD_CAI = "Ahmad & Cai's StackGAN study (tf.distribute on one multi-GPU node, Columbia, 2021)"
# Performance characterization of GANs and multi-GANs, Horovod on OSC Owens.
MURTHY = "Vemparala Narayana Murthy's GAN study (Horovod on OSC Owens, 2021)"
# TensorFlow + Horovod on OSC Owens with ResNet50, InceptionV3, VGG16 (OSU CSE 5194 Lab 2).
CHEN = "Chen, Liu, Isaacson & Xu's CNN study (TensorFlow + Horovod on OSC Owens, 2020)"
# Accurate, Large Minibatch SGD, as presented in Columbia COMS E6998 lecture 5 (2019).
GOYAL = "Goyal et al., Accurate, Large Minibatch SGD (2017)"
# Multi-GPU Horovod lab: a fruit classifier and Caltech-256 on T4 and V100 GPUs (CS2300).
NELSON = "Nelson's multi-GPU Horovod lab (fruit classifier and Caltech-256 on T4/V100, 2021)"
