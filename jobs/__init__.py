"""Workloads that campaigns run: TensorFlow 2 + Horovod training jobs (entry point: train.py).

Nothing in hpcscale/ imports this package; it needs TensorFlow, Horovod is needed only for the
`horovod` strategy. Its files and command line are defined in hpcscale.formats (standard
library and msgspec only), which it imports from the installed hpcscale.
"""
