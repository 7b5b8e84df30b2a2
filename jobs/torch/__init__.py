"""PyTorch DistributedDataParallel twins of the bundled TensorFlow programs (see docs/pytorch.md).

Nothing in hpcscale/ imports this package; it needs torch (`pip install 'hpcscale[torch]'`).
"""
